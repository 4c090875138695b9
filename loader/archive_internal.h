// loader/archive_internal.h — Archive's state, shared by archive.cpp and archive_writer.cpp.
// Loader-internal: includes libzip, never included by public headers.
#pragma once

#include <zip.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "pt2rt/archive.h"
#include "pt2rt/mapped_file.h"

namespace pt2rt {

struct Archive::Impl {
  std::string source;                 ///< path, or "<memory>"
  uint64_t size = 0;                  ///< bytes of the archive file / buffer
  std::vector<uint8_t> bytes;         ///< from_bytes: the owned copy libzip reads from
  std::shared_ptr<const MappedFile> mapping;  ///< open_mapped: the mapping libzip reads from
  zip_t* za = nullptr;                ///< owned; every use holds `mu`
  std::vector<EntryInfo> entries;     ///< libzip index order
  std::unordered_map<std::string, uint64_t> index;  ///< name -> libzip index
  mutable std::mutex mu;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (za != nullptr) zip_discard(za);
  }
};

namespace detail {

/// Lets the archive writer copy entries straight from a source archive's libzip handle.
struct ArchiveAccess {
  static zip_t* handle(const Archive& a) { return a.impl_->za; }
  static std::mutex& mutex(const Archive& a) { return a.impl_->mu; }
  static uint64_t index_of(const Archive& a, const std::string& name) {
    return a.impl_->index.at(name);
  }
};

}  // namespace detail
}  // namespace pt2rt
