// runtime/model/compile_model.h — a Program and its weights compiled into the ModelState the
// per-call path runs (exec/model_state.h): load time's last step.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "exec/model_state.h"
#include "pt2rt/load_options.h"
#include "pt2rt/program.h"

namespace pt2rt {

/// Compiles every graph of `program` for `device`: op resolution under the operator policy
/// (all refused and unknown ops in one OpResolutionError), argument planning, descriptor
/// binding, the pairing checks of forward and backward (every backward Saved(k) is a forward
/// Saved output), then the meta-device check of every graph against `options.run`
/// (meta_check.h; the bounds resolved for an archive of `archive_bytes` bytes). With
/// `options.inference_only` only the inference graph is compiled and checked.
/// @param weights  Program::weights order, already on `device`.
/// @throws FormatError, OpResolutionError; InputError (inference_only without an inference
///   graph, onednn_benchmark without inference_only).
std::shared_ptr<ModelState> compile_model(std::shared_ptr<const Program> program,
                                          std::vector<at::Tensor> weights, c10::Device device,
                                          const LoadOptions& options = {},
                                          uint64_t archive_bytes = 0);

}  // namespace pt2rt
