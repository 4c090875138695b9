// runtime/kernels/conv_prepack.h — an inference plan's 2-D convolutions on oneDNN weights packed
// once, not reordered at every call.
//
// On CPU, when ATen runs a float32 convolution through oneDNN (ATen's ConvBackend::Mkldnn,
// `at::native::select_conv_backend`), `at::mkldnn_convolution` first reorders the dense
// OIHW weight into the blocked layout the oneDNN primitive wants, on every call: for the deep
// layers of a ResNet (512x512x3x3 weights on 2x2 or 4x4 activations) the reorder costs more
// than the convolution. TorchScript's `torch.jit.optimize_for_inference` and TorchInductor's
// CPU freezing pass (`torch._inductor.fx_passes.mkldnn_fusion`, weight prepacking) pack such
// weights once; this pass does the same for pt2rt's inference plans, through the weight cache
// (weight_cache.h), so a packed weight is recomputed only when the weight changes.
//
// At plan build (ExecutionPlan::build; CPU plans with PlanOptions::cacheable_inputs and
// PlanOptions::inference_only, i.e. the inference graph of a LoadOptions::inference_only
// load — a model pt2rt trains changes its weights through torch::optim, whose writes through
// Tensor::data() the weight cache cannot see; oneDNN available and enabled) each `aten::convolution` instruction with
//   - a float32 weight of 4 static dims computed from model weights alone (a weight input, or
//     what the cached prologue computes from weights: a BatchNorm-folded weight),
//     read by this convolution only and not a graph output,
//   - constant stride / padding / dilation / groups, transposed = false, output_padding 0,
//   - a float32 input of 4 static dims,
//   - and for which ATen itself picks oneDNN at the declared sizes and the current intra-op
//     thread count (`select_conv_backend`; batch-1 convolutions on small images mostly go to
//     ATen's im2col + GEMM path instead, and stay there: another algorithm rounds differently)
//     — or, with PlanOptions::onednn_choice Benchmark (LoadOptions::onednn_benchmark), for which
//     oneDNN on the packed weight times faster than ATen's algorithm at plan build
//     (onednn_benchmark.h; results then differ from ATen's by float rounding, as with
//     `torch.backends.cudnn.benchmark`), or with OneDnn every one
// becomes two instructions: `pt2rt::prepack_conv2d_weight` (hoisted into the cached prologue;
// its result replaces the dense weight in the weight's slot, which only this convolution
// reads) and `pt2rt::conv2d_prepacked`. The oneDNN primitive and its inputs are the ones
// ATen's own call would use, so the results are ATen's bits (measured: max difference 0 on
// resnet18 and mobilenet_v2 at batch 8; tests/cpp/runtime/test_weight_cache.cpp). A call whose input is not a contiguous CPU float32
// tensor of 4 dims, or made at another intra-op thread count than the plan was built for
// (ATen's choice for 1x1 kernels depends on it), runs `at::convolution` on the dense weight
// (`to_dense()` of the packed one: exact) — what the unpacked plan would have run.
//
// Memory: the cache holds a packed copy of each such weight (about the weight's size) next to
// the dense weight, for the plan's life. Weights that are inference tensors (a model loaded
// under c10::InferenceMode) are not cached (weight_cache.h), and their packing then runs at
// every call, at about the cost of the reorder it replaces.
//
// The plan rewrite that uses these kernels: plan/prepack_convolutions.h.
#pragma once

#include "kernels/native_ops.h"

namespace pt2rt {

/// pt2rt::prepack_conv2d_weight(Tensor weight, int[] stride, int[] padding, int[] dilation,
///   int groups) -> Tensor: the float32 OIHW `weight` as a oneDNN (mkldnn layout) tensor in
///   the blocked format `at::mkldnn_convolution` reorders it to for these parameters
///   (`at::mkldnn_reorder_conv2d_weight`). Never names an archive node; only plans make it.
const NativeOp& prepack_conv2d_weight_op();

/// pt2rt::conv2d_prepacked(Tensor input, Tensor packed_weight, Tensor? bias, int[] stride,
///   int[] padding, int[] dilation, int groups, int num_threads) -> Tensor:
///   `at::mkldnn_convolution(input, packed_weight, bias, ...)`, or `at::convolution` on the
///   dense weight when the call does not fit (see the file comment). Never names an archive
///   node; only plans make it.
const NativeOp& conv2d_prepacked_op();

}  // namespace pt2rt
