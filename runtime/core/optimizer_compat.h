// runtime/core/optimizer_compat.h — the key of torch::optim::Optimizer::state(),
// the one LibTorch 1.13 / 2.x difference the training state depends on (STYLE.md: narrow seams):
// * 1.13 keys the per-parameter state by c10::guts::to_string(param.unsafeGetTensorImpl())     (a
// std::string, torch/optim/adagrad.h, serialize.h);   * 2.x by the TensorImpl pointer itself
// (void*).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/optim/optimizer.h>

#include <string>

namespace pt2rt {

/// The key type of Optimizer::state().
using OptimizerStateKey =
    std::decay_t<decltype(std::declval<torch::optim::Optimizer&>().state())>::key_type;

/// The key torch::optim uses for `param`'s state.
inline OptimizerStateKey optimizer_state_key(const at::Tensor& param) {
#if TORCH_VERSION_MAJOR >= 2
  return param.unsafeGetTensorImpl();
#else
  return c10::guts::to_string(param.unsafeGetTensorImpl());
#endif
}

}  // namespace pt2rt
