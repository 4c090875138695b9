// runtime/kernels/attention_ops.h — pt2rt's attention native ops: F.scaled_dot_product_attention
// without dropout kept as one graph node (exporter/pt2rt/ops/attention_ops.py emits them), run on
// the kernel eager PyTorch picks on the device it runs on.
//
//   pt2rt::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value,
//       Tensor? attn_mask, bool is_causal, float? scale, bool enable_gqa) -> Tensor
//     = ATen's scaled_dot_product_attention with dropout_p = 0
//     (https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html):
//     query [N, ..., Hq, L, E], key [N, ..., H, S, E], value [N, ..., H, S, Ev], all of one
//     floating dtype and device, with equal leading dims (and H == Hq unless enable_gqa, where
//     Hq is a multiple of H); attn_mask boolean (true = attend) or of query's dtype,
//     broadcastable to [N, ..., Hq, L, S]; scale defaults to 1 / sqrt(E). Returns
//     [N, ..., Hq, L, Ev], laid out like query when Ev == E (at::empty_like's preserve rule:
//     what FlashAttention's kernels, on CUDA and _scaled_dot_product_flash_attention_for_cpu,
//     return, passed on as it is), else contiguous; a result in another layout
//     (memory-efficient attention's [N, L, Hq, Ev]) is copied into it. The exporter declared
//     that layout (exporter/pt2rt/ops/attention_ops.py output_layout).
//   pt2rt::scaled_dot_product_attention_backward(Tensor grad_out, Tensor query, Tensor key,
//       Tensor value, <the same flags>) -> Tensor[]
//     [grad_query, grad_key, grad_value], each contiguous with its input's shape, by
//     torch::autograd::grad through the forward's own autograd graph: a forward outside
//     c10::InferenceMode runs ATen's op under autograd, as eager does, and keeps its graph (the
//     fused kernel's saved output and log-sum-exp, never the [L, S] probabilities) in a
//     ForwardStash (forward_stash.h) keyed by its arguments; a backward not handed exactly
//     those, unchanged, recomputes the forward under autograd (torch.utils.checkpoint).
//
// On LibTorch 2.5 and later the kernels call at::scaled_dot_product_attention, which dispatches
// to the same fused kernel as eager PyTorch on that device, dtype and shape; on an older
// LibTorch (1.13 has no SDPA) the math formulation softmax(q kᵀ · scale + mask) v in ATen ops.
// Every size, dtype and device is checked first (an archive is untrusted: c10::Error naming
// what is wrong). On meta tensors (the load-time check, meta_check.cpp) the kernels only
// compute the result shapes.
#pragma once

#include <ATen/core/stack.h>

#include <cstddef>

namespace pt2rt {

extern const char* const kAttentionSchema;
extern const char* const kAttentionBackwardSchema;

/// Boxed kernels (NativeKernel): consume the arguments from `stack`, push the results.
void attention_kernel(torch::jit::Stack& stack);
void attention_backward_kernel(torch::jit::Stack& stack);

/// Forwards whose backward has not come yet, kept by the ops' ForwardStash (tests).
size_t attention_stash_size();

}  // namespace pt2rt
