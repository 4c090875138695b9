// runtime/kernels/linear_prepack.h — an inference plan's linear layers on oneDNN with the weight
// packed once, when the load asks for oneDNN (LoadOptions::onednn_benchmark).
//
// The exporter records `nn.Linear` as `addmm(bias, x, t(W))` (or `mm(x, t(W))`, the bias
// added apart), which ATen runs through the BLAS. With Debian's default reference BLAS,
// oneDNN's inner product (`at::mkldnn_linear`) is up to 16x faster at batch 32 (and slower for
// matrix-vector products); TorchScript's `torch.jit.optimize_for_inference` moves such layers
// to oneDNN too. At plan build (ExecutionPlan::build; CPU plans with
// PlanOptions::inference_only and cacheable_inputs, and PlanOptions::onednn_choice other than
// Aten, whose ATen kernel for these ops is always the BLAS) each
//   `aten::addmm(bias, x, Wt, beta=1, alpha=1)` or `aten::mm(x, Wt)` with
//   - x a float32 tensor of static sizes [rows, in],
//   - Wt a float32 tensor of static sizes [in, out] computed from model weights alone (the
//     `t(W)` of a parameter), read by this instruction only and not a graph output,
//   - bias (addmm) a float32 tensor of static sizes [out],
//   - and, with OneDnnChoice::Benchmark, oneDNN timed faster at those sizes (onednn_benchmark.h)
// becomes `pt2rt::prepack_linear_weight` (hoisted into the cached prologue, weight_cache.h:
// `Wt.t()` made contiguous and converted to a oneDNN tensor, replacing Wt in its slot, which
// only this instruction reads) and `pt2rt::linear_prepacked` (`at::mkldnn_linear` on the input
// converted with `to_mkldnn`, the result converted back with `to_dense`: a contiguous float32
// [rows, out] tensor, as addmm's). Results differ from the BLAS's by float rounding. A call
// whose input or bias is not a CPU float32 strided tensor of the declared rank runs
// `at::addmm` / `at::mm` on `to_dense()` of the packed weight (exact).
//
// Memory: the cache holds a oneDNN copy of each such weight next to the dense one.
//
// The plan rewrite that uses these kernels: plan/prepack_linears.h.
#pragma once

#include "kernels/native_ops.h"

namespace pt2rt {

/// pt2rt::prepack_linear_weight(Tensor weight_t) -> Tensor: `weight_t` [in, out] (a float32
/// CPU tensor) as the contiguous [out, in] weight in a oneDNN (mkldnn layout) tensor; any
/// other tensor is returned as is. Never names an archive node; only plans make it.
const NativeOp& prepack_linear_weight_op();

/// pt2rt::linear_prepacked(Tensor input, Tensor packed_weight, Tensor? bias) -> Tensor:
/// `input` [rows, in] times the weight, plus `bias` [out]: `at::mkldnn_linear`, or
/// `at::addmm` / `at::mm` on the dense weight when the call does not fit (file comment).
/// Never names an archive node; only plans make it.
const NativeOp& linear_prepacked_op();

}  // namespace pt2rt
