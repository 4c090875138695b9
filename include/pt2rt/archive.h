// pt2rt/archive.h — read access to a model.pt2 zip archive (libzip).
//
// Byte layout (archive format v1, DESIGN.md "The archive"):
//
//   zip file, every entry STORED (method 0), every entry's data 64-byte aligned
//   ├── archive_format      "pt2rt"
//   ├── archive_version     "1"          (major version of this layout)
//   ├── program.fb          FlatBuffer, root table pt2rt.fb.Program, identifier "PT2R"
//   ├── weights/<n>         raw little-endian storage bytes of one tensor
//   ├── extra/<name>        free-form user files; never executed
//   └── optimizer/<name>    training state (schema 1.3, optional): optimizer/state.fb and
//                           its tensors optimizer/<n> (pt2rt/training_state.h)
//
// Opening checks, in order: it is a zip (libzip); every entry name belongs to the layout above
// (relative, no "." / ".." / empty components, no backslash or control bytes); entry names are
// unique; every entry's
// local header agrees with the central directory (name, method, data inside the file);
// archive_format is present and equals kArchiveFormat; archive_version is present and its
// major version is one this build knows; program.fb is present.
//
// Reading: libzip (zip_fread) copies each entry into caller memory, so reads are correct
// for any alignment; the CRC-32 of every entry is checked when its last byte is read.
// EntryInfo::data_offset comes from a small central-directory walk (libzip has no public
// API for it) and lets callers check the 64-byte alignment the format promises.
// An archive opened on a mapping (open_mapped) can also hand out its STORED entries in place
// (mapped_entry): Model::load with LoadOptions::map_weights decodes program.fb and views the
// weights there, so load reads only the pages it touches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pt2rt/limits.h"

namespace pt2rt {

class MappedFile;

/// Facts about one zip entry, read from the central directory.
struct EntryInfo {
  std::string name;
  uint64_t size = 0;             ///< uncompressed bytes
  uint64_t compressed_size = 0;
  bool stored = true;            ///< compression method 0 (STORED)
  uint16_t method = 0;           ///< zip compression method (0 STORED, 8 DEFLATE, ...)
  uint64_t data_offset = 0;      ///< absolute offset of the entry's (compressed) data in the
                                 ///< archive file / buffer, from its local header
  uint32_t crc = 0;              ///< CRC-32 of the uncompressed bytes
};

namespace detail {
struct ArchiveAccess;  // loader-internal (archive_writer.cpp): the libzip handle of a source
}

/// An opened archive. Move-only; owns the libzip handle (and, for `from_bytes`, a copy of
/// the buffer). Reads are serialized internally, so one Archive may be read from
/// several threads.
class Archive {
 public:
  /// Opens the archive at `path`.
  /// @throws FormatError: missing/unreadable file, not a zip, duplicate entry names,
  ///   missing or wrong archive_format, unknown archive_version (names both versions).
  static Archive open(const std::string& path);
  /// Opens an archive held in memory; the bytes are copied and owned by the Archive.
  /// @throws FormatError as open().
  static Archive from_bytes(const uint8_t* data, size_t size);
  /// Opens the archive held by a memory-mapped file (pt2rt/mapped_file.h) without copying
  /// it: libzip and the layout walk read the mapping, so every check of open() and
  /// from_bytes() applies unchanged (names, duplicates, local headers against the central
  /// directory, each entry's data inside the file, archive_format, archive_version,
  /// program.fb present). The Archive keeps `file` alive; source() is file->path().
  /// @throws FormatError as open().
  static Archive open_mapped(std::shared_ptr<const MappedFile> file);

  Archive(Archive&&) noexcept;
  Archive& operator=(Archive&&) noexcept;
  ~Archive();

  /// Where the archive came from ("<memory>" for from_bytes), for messages.
  const std::string& source() const;
  /// Bytes of the archive (file or buffer) — what LoadOptions' size-relative bounds scale with.
  uint64_t size() const;
  const std::vector<EntryInfo>& entries() const;
  bool has_entry(const std::string& name) const;
  /// @throws FormatError when absent.
  const EntryInfo& entry(const std::string& name) const;

  /// Reads a whole entry into a new buffer (use for small entries; program.fb goes through
  /// read_program_bytes, which also requires it STORED). A STORED entry's buffer is allocated
  /// at its size, which the file bounds; a compressed entry's grows as inflated bytes arrive,
  /// so a lying declared size costs nothing. Thread-safe (reads are serialized internally).
  /// @throws FormatError naming the entry: missing, short or long read, CRC error, declared
  ///   size above `max_size` (default ArchiveLimits::max_entry_bytes, 64 MiB).
  std::vector<uint8_t> read(const std::string& name,
                            uint64_t max_size = ArchiveLimits{}.max_entry_bytes) const;
  /// Reads exactly `size` bytes of entry `name` into caller-owned memory at `dst`
  /// (no intermediate copy). Works for STORED and compressed entries; `dst` needs no
  /// particular alignment. Thread-safe.
  /// @throws FormatError naming the entry when it is missing, its size differs from `size`
  ///   (both numbers in the message), or a read fails (short read, CRC error).
  void read_into(const std::string& name, void* dst, uint64_t size) const;

  /// Reads entry `name` through libzip without keeping its bytes (1 MiB at a time), so that
  /// its CRC-32 and length are checked. Thread-safe.
  /// @throws FormatError naming the entry: missing, short or long read, CRC error.
  void check_entry(const std::string& name) const;

  /// The mapping this archive was opened on (open_mapped), or null.
  const std::shared_ptr<const MappedFile>& mapping() const;
  /// For an archive opened with open_mapped: a pointer to the bytes of STORED entry `name`
  /// inside the mapping (entry.size bytes, valid while the mapping lives; the CRC-32 is not
  /// checked — that would read every byte). Null for other archives.
  /// @throws FormatError when the entry is missing, compressed, or its data lies outside the
  ///   mapped file.
  const uint8_t* mapped_entry(const std::string& name) const;

  struct Impl;  ///< opaque; defined loader-internally (loader/archive_internal.h)

 private:
  friend struct detail::ArchiveAccess;
  explicit Archive(std::unique_ptr<Impl> impl);
  static Archive open_source(std::unique_ptr<Impl> impl);
  static Archive open_buffer(std::unique_ptr<Impl> impl, const uint8_t* data, size_t size);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pt2rt
