// loader/zip_layout.cpp — bounds-checked walk of the zip structures (see zip_layout.h).
#include "zip_layout.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace pt2rt::detail {
namespace {

constexpr uint32_t kLocalMagic = 0x04034b50;
constexpr uint32_t kCentralMagic = 0x02014b50;
constexpr uint32_t kEocdMagic = 0x06054b50;
constexpr uint32_t kEocd64Magic = 0x06064b50;
constexpr uint32_t kEocd64LocatorMagic = 0x07064b50;
constexpr size_t kEocdSize = 22;
constexpr size_t kEocd64LocatorSize = 20;
constexpr size_t kEocd64Size = 56;
constexpr size_t kCentralSize = 46;
constexpr size_t kLocalSize = 30;
constexpr size_t kMaxComment = 0xffff;
constexpr uint16_t kZip64ExtraId = 0x0001;

// Little-endian field readers over a byte buffer; callers check the bounds first.
uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t u64(const uint8_t* p) {
  return static_cast<uint64_t>(u32(p)) | (static_cast<uint64_t>(u32(p + 4)) << 32);
}

/// offset + len <= file_size without overflow.
bool in_file(uint64_t offset, uint64_t len, uint64_t file_size) {
  return offset <= file_size && len <= file_size - offset;
}

std::vector<uint8_t> read_range(const ReadAt& read_at, uint64_t file_size, uint64_t offset,
                                uint64_t len, const char* what) {
  if (!in_file(offset, len, file_size)) {
    throw ZipLayoutError(std::string(what) + " at offset " + std::to_string(offset) + " (+" +
                         std::to_string(len) + " bytes) lies outside the file (" +
                         std::to_string(file_size) + " bytes)");
  }
  std::vector<uint8_t> buf(static_cast<size_t>(len));
  if (len > 0 && !read_at(offset, buf.data(), buf.size())) {
    throw ZipLayoutError(std::string("cannot read ") + what + " at offset " +
                         std::to_string(offset));
  }
  return buf;
}

struct CentralDirectory {
  uint64_t entries = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
};

CentralDirectory find_central_directory(uint64_t file_size, const ReadAt& read_at) {
  if (file_size < kEocdSize) {
    throw ZipLayoutError("file of " + std::to_string(file_size) +
                         " bytes is too small for a zip end-of-central-directory record");
  }
  const uint64_t tail_len = std::min<uint64_t>(file_size, kEocdSize + kMaxComment);
  const uint64_t tail_start = file_size - tail_len;
  const std::vector<uint8_t> tail = read_range(read_at, file_size, tail_start, tail_len, "tail");
  // The EOCD is the last record of the file, followed only by its comment.
  size_t pos = tail.size() - kEocdSize + 1;
  bool found = false;
  while (pos-- > 0) {
    if (u32(&tail[pos]) == kEocdMagic) {
      found = true;
      break;
    }
  }
  if (!found) throw ZipLayoutError("no end-of-central-directory record");
  const uint8_t* eocd = &tail[pos];
  CentralDirectory cd;
  cd.entries = u16(eocd + 10);
  cd.size = u32(eocd + 12);
  cd.offset = u32(eocd + 16);
  const uint64_t eocd_offset = tail_start + pos;
  if (eocd_offset >= kEocd64LocatorSize) {
    std::vector<uint8_t> loc = read_range(read_at, file_size, eocd_offset - kEocd64LocatorSize,
                                          kEocd64LocatorSize, "zip64 locator");
    if (u32(loc.data()) == kEocd64LocatorMagic) {
      const uint64_t eocd64_offset = u64(loc.data() + 8);
      std::vector<uint8_t> e64 =
          read_range(read_at, file_size, eocd64_offset, kEocd64Size, "zip64 end record");
      if (u32(e64.data()) != kEocd64Magic) {
        throw ZipLayoutError("bad zip64 end-of-central-directory signature at offset " +
                             std::to_string(eocd64_offset));
      }
      cd.entries = u64(e64.data() + 32);
      cd.size = u64(e64.data() + 40);
      cd.offset = u64(e64.data() + 48);
    }
  }
  if (!in_file(cd.offset, cd.size, file_size)) {
    throw ZipLayoutError("central directory (offset " + std::to_string(cd.offset) + ", " +
                         std::to_string(cd.size) + " bytes) lies outside the file (" +
                         std::to_string(file_size) + " bytes)");
  }
  if (cd.entries > cd.size / kCentralSize) {
    throw ZipLayoutError("central directory claims " + std::to_string(cd.entries) +
                         " entries but holds only " + std::to_string(cd.size) + " bytes");
  }
  return cd;
}

// Applies the zip64 extended-information extra field to the saturated 32-bit fields.
void apply_zip64_extra(const uint8_t* extra, size_t len, bool need_usize, bool need_csize,
                       bool need_offset, ZipLayoutEntry& e) {
  size_t p = 0;
  while (p + 4 <= len) {
    const uint16_t id = u16(extra + p);
    const uint16_t n = u16(extra + p + 2);
    if (p + 4 + n > len) break;
    if (id == kZip64ExtraId) {
      const uint8_t* f = extra + p + 4;
      size_t left = n;
      auto take = [&](uint64_t& out) {
        if (left < 8) throw ZipLayoutError("truncated zip64 extra field for '" + e.name + "'");
        out = u64(f);
        f += 8;
        left -= 8;
      };
      if (need_usize) take(e.size);
      if (need_csize) take(e.compressed_size);
      if (need_offset) take(e.local_header_offset);
      return;
    }
    p += 4 + n;
  }
  if (need_usize || need_csize || need_offset) {
    throw ZipLayoutError("entry '" + e.name + "' needs a zip64 extra field but has none");
  }
}

}  // namespace

std::vector<ZipLayoutEntry> read_zip_layout(uint64_t file_size, const ReadAt& read_at) {
  const CentralDirectory cd = find_central_directory(file_size, read_at);
  const std::vector<uint8_t> dir =
      read_range(read_at, file_size, cd.offset, cd.size, "central directory");
  std::vector<ZipLayoutEntry> out;
  out.reserve(static_cast<size_t>(cd.entries));
  size_t pos = 0;
  for (uint64_t i = 0; i < cd.entries; ++i) {
    if (dir.size() - pos < kCentralSize || u32(&dir[pos]) != kCentralMagic) {
      throw ZipLayoutError("central directory entry " + std::to_string(i) +
                           " is missing or has a bad signature");
    }
    const uint8_t* c = &dir[pos];
    const size_t n = u16(c + 28), m = u16(c + 30), k = u16(c + 32);
    if (dir.size() - pos - kCentralSize < n + m + k) {
      throw ZipLayoutError("central directory entry " + std::to_string(i) +
                           " runs past the end of the directory");
    }
    ZipLayoutEntry e;
    e.name.assign(reinterpret_cast<const char*>(c + kCentralSize), n);
    e.method = u16(c + 10);
    e.compressed_size = u32(c + 20);
    e.size = u32(c + 24);
    e.local_header_offset = u32(c + 42);
    const bool need_usize = e.size == 0xffffffffu;
    const bool need_csize = e.compressed_size == 0xffffffffu;
    const bool need_offset = e.local_header_offset == 0xffffffffu;
    apply_zip64_extra(c + kCentralSize + n, m, need_usize, need_csize, need_offset, e);
    pos += kCentralSize + n + m + k;

    const std::vector<uint8_t> local =
        read_range(read_at, file_size, e.local_header_offset, kLocalSize, "local header");
    if (u32(local.data()) != kLocalMagic) {
      throw ZipLayoutError("entry '" + e.name + "': bad local header signature at offset " +
                           std::to_string(e.local_header_offset));
    }
    const size_t ln = u16(local.data() + 26), lm = u16(local.data() + 28);
    const std::vector<uint8_t> lname = read_range(
        read_at, file_size, e.local_header_offset + kLocalSize, ln, "local header name");
    // (memcmp only for n > 0: an empty vector's data() may be null, which memcmp must not get)
    if (ln != n || (n > 0 && std::memcmp(lname.data(), e.name.data(), n) != 0)) {
      throw ZipLayoutError("entry '" + e.name + "': local header name '" +
                           std::string(lname.begin(), lname.end()) +
                           "' differs from the central directory");
    }
    if (u16(local.data() + 8) != e.method) {
      throw ZipLayoutError("entry '" + e.name + "': local header method " +
                           std::to_string(u16(local.data() + 8)) +
                           " differs from the central directory's " + std::to_string(e.method));
    }
    e.data_offset = e.local_header_offset + kLocalSize + ln + lm;
    if (!in_file(e.data_offset, e.compressed_size, file_size)) {
      throw ZipLayoutError("entry '" + e.name + "': data (offset " +
                           std::to_string(e.data_offset) + ", " +
                           std::to_string(e.compressed_size) + " bytes) lies outside the file (" +
                           std::to_string(file_size) + " bytes)");
    }
    out.push_back(std::move(e));
  }
  return out;
}

ReadAt read_at_memory(const uint8_t* data, size_t size) {
  return [data, size](uint64_t offset, void* dst, size_t len) {
    if (!in_file(offset, len, size)) return false;
    if (len > 0) std::memcpy(dst, data + offset, len);
    return true;
  };
}

ReadAt read_at_fd(int fd) {
  return [fd](uint64_t offset, void* dst, size_t len) {
    auto* out = static_cast<uint8_t*>(dst);
    while (len > 0) {
      const ssize_t n = ::pread(fd, out, len, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      out += n;
      len -= static_cast<size_t>(n);
      offset += static_cast<uint64_t>(n);
    }
    return true;
  };
}

}  // namespace pt2rt::detail
