// pt2rt/mapped_weights.h — an archive's weights as tensors viewing a memory-mapped file.
//
// The archive format keeps every weight entry STORED with its data 64-byte aligned
// (pt2rt/archive.h), so a weight's bytes in the file already are its tensor's storage:
// map_weights makes CPU tensors over them without reading or copying anything. Loading is
// then O(metadata), and resident memory grows only by the pages a run actually touches
// (shared with the page cache and with other processes mapping the same file). The mapping is
// private and copy-on-write (pt2rt/mapped_file.h): in-place updates of a mapped weight (an
// optimizer step, copy_) work and stay private to the process; the file never changes.
//
// What load_weights checks and this does not: the CRC-32 of the weight entries (checking it
// would read every byte, which is what mapping avoids; Model::load checks them on a thread of
// its own, LoadOptions::check_mapped_weights, and its first call waits for that). Everything
// else is checked alike —
// entry present, STORED, 64-byte aligned, inside the file, exactly dtype x storage-numel
// bytes; bool weights hold only bytes 0 and 1 (those few are read).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "pt2rt/archive.h"
#include "pt2rt/mapped_file.h"
#include "pt2rt/program.h"

namespace pt2rt {

/// Tensors viewing `file` for every weight of `program` (Program::weights order), each a
/// leaf with requires_grad as recorded; each holds `file` alive. `archive` must have been
/// opened on the mapped file itself (Archive::open(file->fd_path())), so entry offsets refer
/// to the mapped bytes.
/// @throws FormatError as load_weights (missing, compressed, misaligned, wrong length, bad
///   bool bytes), and when an entry's data lies outside the mapped file.
std::vector<at::Tensor> map_weights(const std::shared_ptr<const MappedFile>& file,
                                    const Archive& archive, const Program& program);

}  // namespace pt2rt
