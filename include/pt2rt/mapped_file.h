// pt2rt/mapped_file.h — a file mapped into memory, copy-on-write (POSIX mmap).
//
// The whole file is mapped with PROT_READ | PROT_WRITE and MAP_PRIVATE: reading a page reads
// the file (through the page cache, only the pages touched become resident); writing a page
// gives this process a private copy of it — the file itself is never modified, by this
// process or through it, and a tensor viewing the mapping behaves like any writable tensor
// (an optimizer may update mapped weights in place). The mapping lives as long as the last
// shared_ptr to it (tensors created by map_weights hold one).
//
// A file that shrinks while mapped makes reads past its new end fault (SIGBUS), as with any
// mmap; pt2rt's own writers replace archives by rename, which leaves a mapped file intact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace pt2rt {

class MappedFile {
 public:
  /// Maps `path` (see above). An empty file maps to data() == nullptr, size() == 0.
  /// @throws FormatError naming the path when it cannot be opened, stat'ed or mapped.
  static std::shared_ptr<const MappedFile> open(const std::string& path);

  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  /// Writable view of the private (copy-on-write) mapping.
  uint8_t* mutable_data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  /// "/proc/self/fd/<n>": the mapped file itself, even if `path` was replaced since (so an
  /// Archive opened on it reads the very bytes that are mapped). Valid while this lives.
  const std::string& fd_path() const { return fd_path_; }

 private:
  MappedFile() = default;
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
  std::string path_, fd_path_;
};

}  // namespace pt2rt
