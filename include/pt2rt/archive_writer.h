// pt2rt/archive_writer.h — write model.pt2 archives (libzip), atomically.
//
// Every entry is written STORED with its data on a kDataAlignment (64-byte) boundary, the
// layout archive.h describes. Alignment: libzip writes entries in index order, local header
// first, so the writer predicts each local header's offset and pads it with an extra field
// (id 0xD935, Android zipalign's: u16 alignment + zeros) set with zip_file_extra_field_set(...,
// ZIP_FL_LOCAL); after libzip has written the file, the writer re-reads every local header
// and fails (leaving the target untouched) if any data offset is not aligned.
//
// Atomicity (what Model::save promises): the archive is written to a temp file created
// with mkstemp in the target's directory, fsync'ed, renamed over the target, and the
// directory is fsync'ed. On any failure the temp file is removed and the target is left
// as it was; a crash can leave at most a stray ".<name>.pt2rt-tmp-XXXXXX" file, never a
// half-written target. Such leftovers are removed by the next write to the same path: a
// writer holds an exclusive flock(2) on its temp file until the rename, so a temp file whose
// lock can be taken belongs to no live save (only names of exactly that pattern, regular
// files owned by the same user, are ever removed).
//
// Permissions: the replaced file's, or what open(..., 0666) gives a new file (0666 & ~umask,
// the umask read from /proc/self/status) — the same as the Python exporter's write_archive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pt2rt/limits.h"

namespace pt2rt {

class Archive;

/// Bytes of one entry. Non-owning: `data` must stay valid until the write call returns.
struct EntryBytes {
  const void* data = nullptr;
  uint64_t size = 0;
};

/// One entry to write: its zip name and its bytes.
struct NewEntry {
  std::string name;
  EntryBytes bytes;
};

struct WriteOptions {
  /// Test hook simulating a crash or a full disk halfway: when set, writes to the temp file
  /// fail with ENOSPC once this many bytes have been written (the partial write counts).
  std::optional<uint64_t> fail_after_bytes;
  /// Bounds on what copying the source archive may cost: the program is decoded within
  /// `limits`, and a compressed entry copied from a source archive (extra/*) may inflate to at
  /// most `limits.max_entry_bytes`.
  ArchiveLimits limits;
  /// write_archive_copy: entries of the source whose name starts with one of these are not
  /// copied (Model::save drops the training state `optimizer/`: it belongs to the old weights).
  std::vector<std::string> omit_prefixes;
};

/// Writes `entries`, in this order, as a new archive at `path` (atomically, see above).
/// No content checks: callers write what the format requires (archive_format first, ...).
/// @throws Error naming `path` and the failing step (temp file, write, fsync, rename,
///   alignment check); the target is then unchanged and no temp file is left behind.
/// @throws Error when two entries have the same name.
void write_archive(const std::string& path, const std::vector<NewEntry>& entries,
                   const WriteOptions& options = {});

/// Writes a copy of `source` at `path`: every entry of `source` in its order (but those under
/// `options.omit_prefixes` that are not replaced), except that an entry named in
/// `replacements` gets the new bytes; replacement names that `source`
/// lacks are appended in the order given. Copied entries are decompressed if needed (their
/// CRC is checked while copying) and written STORED. `path` may be `source`'s own file:
/// `source` keeps reading the old file, which the rename replaces at the very end.
/// Holds `source`'s read lock for the duration (other reads of `source` wait).
/// @throws Error as write_archive, also when a source entry fails to read (CRC error, ...)
///   or a replacement name is given twice.
void write_archive_copy(const std::string& path, const Archive& source,
                        const std::vector<NewEntry>& replacements,
                        const WriteOptions& options = {});

/// Returns `program.fb` bytes with the references of every bundled example dropped (inputs
/// kept): they were computed with the weights the caller is replacing. Uses the FlatBuffers
/// object API (UnPack, clear, Pack, Finish with identifier "PT2R"). Fields unknown to this
/// build cannot survive UnPack/Pack, so when the input's schema minor is newer than this
/// build's, the output is stamped with this build's schema version. Without any references
/// the input bytes are returned unchanged.
/// @throws FormatError when `data` is not a valid program (decode_program's checks, with
///   `limits`).
std::vector<uint8_t> drop_example_references(const uint8_t* data, size_t size,
                                             const ArchiveLimits& limits = {});

/// Returns `program.fb` bytes for deployment (ONNX Runtime's "export for inferencing"
/// analogue): only the inference graph is kept (forward, backward and joint graphs are
/// removed) and the bundled examples keep their inputs and eval-mode output references but
/// lose the training ones (train-mode outputs, cotangents, gradients, buffers); operators
/// only the removed graphs call leave the table (loading needs every operator of the table:
/// the copy then loads where those backward kernels are missing). Weights, symbols and
/// metadata are unchanged. Same object-API round trip as
/// drop_example_references.
/// @throws InputError when the program has no inference graph; FormatError as
///   drop_example_references.
std::vector<uint8_t> strip_training(const uint8_t* data, size_t size,
                                    const ArchiveLimits& limits = {});

}  // namespace pt2rt
