// cli/archive_facts.h — the archive file as a zip, for `export-cli inspect`: its format and
// version entries, its entries, and where its bytes go (weights, program, bundled examples,
// training state, extra files, zip structure).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pt2rt/archive.h"
#include "pt2rt/program.h"

namespace pt2rt::cli {

/// Facts about the archive file itself (from the zip central directory).
struct ArchiveFacts {
  std::string path;
  uint64_t file_bytes = 0;      ///< size of the file (Archive::size)
  std::string archive_format;   ///< content of the entry archive_format ("pt2rt")
  std::string archive_version;  ///< content of the entry archive_version ("1")
  std::vector<EntryInfo> entries;
};

/// Reads the facts of `archive` (the two version entries, at most 4 KiB each; Archive::open
/// checked both). `path` is kept for messages.
/// @throws FormatError from Archive::read when an entry cannot be read.
ArchiveFacts read_archive_facts(const std::string& path, const Archive& archive);

/// One part of an archive's bytes.
struct SizePart {
  std::string name;  ///< "weights/", "program.fb", "bundled examples", "zip structure", ...
  uint64_t bytes = 0;
  bool within_program = false;  ///< a share of program.fb (the bundled examples), not a sum part
};

/// Where the bytes of the file go: `weights/` entries, `program.fb` (and within it the
/// bundled examples' tensors: their inputs and references as decoded, a lower bound of what
/// they take in the FlatBuffer), the training state `optimizer/`, `extra/` files, the entries
/// archive_format and archive_version, other entries, and the zip structure (local headers,
/// alignment padding, central directory: the file size less the entries' stored bytes). Parts with
/// no bytes are left out, except weights/ and program.fb. The parts that are not `within_program`
/// sum to file_bytes.
std::vector<SizePart> size_breakdown(const ArchiveFacts& facts, const Program& program);

/// "812 B", "21.3 KiB", "44.9 MiB", "1.2 GiB".
std::string human_bytes(uint64_t bytes);

}  // namespace pt2rt::cli
