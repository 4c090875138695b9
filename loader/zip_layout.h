// loader/zip_layout.h — where each zip entry's data starts (loader-internal).
//
// libzip has no public API for an entry's data offset, which pt2rt needs to check the
// format's 64-byte alignment (and, later, to map weights). This is a small, bounds-checked
// walk over the zip structures that libzip has usually already accepted:
//
//   [local header 30 B | name n | extra m | data ...]*   central directory   [zip64 EOCD,
//   zip64 locator]  EOCD (22 B + comment)
//
//   EOCD          "PK\5\6", u16 entries at +10, u32 cd size at +12, u32 cd offset at +16
//   zip64 locator "PK\6\7" just before the EOCD, u64 zip64-EOCD offset at +8
//   zip64 EOCD    "PK\6\6", u64 entries at +32, u64 cd size at +40, u64 cd offset at +48
//   central entry "PK\1\2" 46 B: u16 method +10, u32 crc +16, u32 csize +20, u32 usize +24,
//                 u16 n +28, u16 m +30, u16 k +32, u32 local offset +42; name, extra
//                 (zip64 extra 0x0001: usize, csize, offset — each only when saturated)
//   local header  "PK\3\4" 30 B: u16 method +8, u16 n +26, u16 m +28; name, extra, data
//
// Every read is range-checked against the file size; a malformed file gives ZipLayoutError,
// never an out-of-bounds access.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace pt2rt::detail {

struct ZipLayoutError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ZipLayoutEntry {
  std::string name;              ///< raw name bytes from the central directory
  uint16_t method = 0;
  uint64_t compressed_size = 0;
  uint64_t size = 0;
  uint64_t local_header_offset = 0;
  uint64_t data_offset = 0;      ///< local_header_offset + 30 + name + local extra
};

/// Copies `len` bytes at `offset` of the file into `dst`; returns false when the range is
/// not inside the file or the read fails.
using ReadAt = std::function<bool(uint64_t offset, void* dst, size_t len)>;

/// Walks the central directory (zip64 aware) and each entry's local header.
/// Entries come back in central-directory order (libzip's index order).
/// @throws ZipLayoutError describing the first inconsistency (bad signature, range outside
///   the file, local name differing from the central name, local method differing).
std::vector<ZipLayoutEntry> read_zip_layout(uint64_t file_size, const ReadAt& read_at);

/// ReadAt over a memory buffer (not owned; must outlive the returned function).
ReadAt read_at_memory(const uint8_t* data, size_t size);
/// ReadAt over an open file descriptor (pread; the fd is not owned).
ReadAt read_at_fd(int fd);

}  // namespace pt2rt::detail
