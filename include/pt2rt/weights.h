// pt2rt/weights.h — materialize an archive's weights as tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

#include "pt2rt/archive.h"
#include "pt2rt/program.h"

namespace pt2rt {

/// Reads every weight of `program` from `archive` into a tensor on `device`, in
/// Program::weights order. Each entry is read once, straight into its final CPU tensor
/// (no intermediate copy); for CUDA through a pinned staging buffer and a copy.
/// Entries must be STORED and 64-byte aligned; a compressed or misaligned entry is
/// refused. Parameters come back as leaf tensors with requires_grad as recorded.
/// @throws FormatError naming the entry: missing, wrong length (dtype × storage numel,
///   checked arithmetic), compressed, misaligned, sizes/strides outside the storage.
std::vector<at::Tensor> load_weights(const Archive& archive, const Program& program,
                                     c10::Device device);

}  // namespace pt2rt
