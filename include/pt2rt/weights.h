// pt2rt/weights.h — materialize an archive's weights as tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "pt2rt/archive.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/program.h"

namespace pt2rt {

/// Reads every weight of `program` from `archive` into a tensor on `device`, in
/// Program::weights order. Each entry is read once, straight into its final CPU tensor
/// (no intermediate copy): a storage of exactly byte_length bytes, viewed with the recorded
/// sizes, strides and storage_offset (Tensor::set_). For CUDA the entry is read into a
/// pinned staging tensor (TensorOptions::pinned_memory) and copied with
/// Tensor::to(device, non_blocking=true); other devices get a CPU read and a copy.
/// Entries must be STORED and 64-byte aligned; a compressed or misaligned entry is
/// refused. Every weight comes back as a leaf tensor with requires_grad as recorded (only
/// floating/complex weights may require grad; decode_program checks it). Bool weights
/// must hold only bytes 0 and 1.
/// Byte order: the archive is little-endian; on a big-endian host this throws FormatError
/// (no byte-swapping is done).
/// @throws FormatError naming the weight and the entry: missing, wrong length (with both
///   numbers: dtype × storage numel, checked arithmetic), compressed, misaligned, CRC error,
///   invalid bool bytes.
/// @throws InputError when `device` is CUDA and this LibTorch has no CUDA.
std::vector<at::Tensor> load_weights(const Archive& archive, const Program& program,
                                     c10::Device device);

/// The bytes of entry `info.entry` for the tensor `value`: a contiguous 1-D CPU tensor of
/// dtype `info.dtype` and storage-numel elements (exactly `info.byte_length` bytes) in which
/// `value` sits at the recorded sizes/strides/storage_offset (elements outside the view are
/// zero). `value` may live on any device; it is copied, never modified.
/// @throws InputError when `value`'s dtype or sizes differ from `info`'s.
at::Tensor weight_entry_bytes(const WeightInfo& info, const at::Tensor& value);

/// A tensor bundled in program.fb (Example inputs, eager references: contiguous, row-major,
/// little-endian) as a new contiguous CPU tensor of its dtype and sizes, owned by the caller.
/// @throws FormatError when the byte count is not dtype size × numel (decode_program checks
///   it for every bundled tensor it decoded, so this is for hand-made TensorData).
at::Tensor to_tensor(const TensorData& data);

/// Model::save's archive step: writes a copy of `source` at `path` in which every
/// `program.weights[i].entry` holds `weights[i]` (weight_entry_bytes) and program.fb has
/// its example references dropped (drop_example_references); other entries are copied.
/// Atomic as write_archive_copy (temp file, fsync, rename): on failure `path` is unchanged.
/// @param weights  one tensor per Program::weights entry, same order, dtypes and sizes.
/// @throws InputError (wrong number/dtype/sizes of tensors), Error (write failed).
void save_weights(const std::string& path, const Archive& source, const Program& program,
                  const std::vector<at::Tensor>& weights, const WriteOptions& options = {});

}  // namespace pt2rt
