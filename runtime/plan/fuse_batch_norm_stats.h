// runtime/plan/fuse_batch_norm_stats.h — a training-mode BatchNorm's running-statistics update
// run by the batch-norm kernel itself (kernels/batch_norm_stats.h), as eager PyTorch runs it.
//
// Graphs carry no mutation, so the exporter writes a training-mode BatchNorm as
// (exporter/pt2rt/decompositions.py, both torch lines):
//
//   out, save_mean, save_invstd = native_batch_norm(x, w, b, None, None, True, momentum, eps)
//   new_mean = lerp.Scalar(running_mean, save_mean, momentum)
//   p = pow.Tensor_Scalar(save_invstd, -2)          # biased variance + eps
//   s = sub.Tensor(p, eps)                          # biased variance
//   u = mul.Tensor(s, n / (n - 1))                  # unbiased variance (n per channel)
//   new_var = lerp.Scalar(running_var, u, momentum)
//
// with new_mean / new_var returned as InputMutation outputs; where the per-channel count n is
// symbolic (dynamic shapes) the unbiased variance is a second pass over the input instead,
// u = var.correction(x, [0, 2, ...], correction=1). Eager PyTorch (and TorchScript)
// instead pass the running statistics to the kernel, which updates them in place from the
// mean and variance it has just computed (ATen's batch_norm_cpu_update_stats_template and the
// CUDA batch_norm_update_stats: `running = momentum * batch + (1 - momentum) * running`, in the
// accumulation type, the variance unbiased). Five small ops per layer cost more than the
// update (each dispatches, allocates, and on CPU casts its double scalar), and their float32
// arithmetic on save_invstd differs from the kernel's by rounding.
//
// At plan build (real devices, not the meta check's plan) each such group of instructions,
// matched by data flow with every constant checked (training, the same momentum and eps
// throughout, exponent -2, alpha 1, the factor exactly n / (n - 1) of the input's declared
// static sizes; or the variance pass over the same input along every dim but the channels,
// correction 1, no keepdim) and the intermediates read by nothing else, becomes one
// instruction of the kernel below (a variance pass fewer with dynamic shapes). It returns (out, save_mean, save_invstd, new_mean, new_var): the
// kernel run on the running statistics, so out / save_mean / save_invstd are the bits the
// unfused node computes and new_mean / new_var are eager's bits. Where a statistic is a
// Buffer input read by nothing else whose InputMutation output is the new value — the
// model's own buffer, which the forward's copy-back (model_state.h) would overwrite with it
// anyway — and it shares no storage with another argument at run time, the kernel updates
// it in place, as eager does, bumps its version counter (the kernel writes through the data
// pointer) and returns it; otherwise it works on a clone. When a call's tensors do not fit
// (running statistics not of the input's dtype, device and [C] shape, an input whose
// per-channel count no longer gives the factor, an input dtype other than float32/float64, a
// per-channel count below 2) the kernel computes the group as written.
#pragma once

#include <vector>

#include "plan/plan.h"

namespace pt2rt {

/// Replaces each matched group (see the file comment) in `instructions` — a plan's list in
/// graph order, before finalize — by one batch_norm_with_stats instruction at the
/// native_batch_norm's place, attributed to that node. `graph` is the plan's graph, its
/// inputs and outputs as in the plan. Groups that do not match exactly are left alone.
/// @returns the number of groups fused.
size_t fuse_batch_norm_stats(std::vector<Instruction>& instructions, const Graph& graph);

}  // namespace pt2rt
