// loader/mapped_file.cpp — see pt2rt/mapped_file.h.
#include "pt2rt/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "pt2rt/errors.h"

namespace pt2rt {

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path) {
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->path_ = path;
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused below as not a
  // regular file); it has no effect on regular files.
  m->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (m->fd_ < 0) {
    throw FormatError(path + ": cannot open for mapping: " + std::strerror(errno));
  }
  struct stat st{};
  if (::fstat(m->fd_, &st) != 0) {
    throw FormatError(path + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) throw FormatError(path + ": not a regular file");
  m->fd_path_ = "/proc/self/fd/" + std::to_string(m->fd_);
  m->size_ = static_cast<size_t>(st.st_size);
  if (m->size_ == 0) return m;
  void* p = ::mmap(nullptr, m->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, m->fd_, 0);
  if (p == MAP_FAILED) {
    throw FormatError(path + ": cannot map " + std::to_string(m->size_) + " bytes: " +
                      std::strerror(errno));
  }
  m->data_ = static_cast<uint8_t*>(p);
  return m;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace pt2rt
