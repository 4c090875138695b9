// runtime/kernels/ctc_ops.h — pt2rt's CTC loss native ops: F.ctc_loss computed in a model's
// forward (exporter/pt2rt/ops/ctc_ops.py emits them), with no result whose size depends on data.
//
//   pt2rt::ctc_loss(Tensor log_probs, Tensor targets, Tensor input_lengths,
//       Tensor target_lengths, int blank, bool zero_infinity) -> Tensor
//     = the negative log-likelihood of ATen's _ctc_loss (Graves et al. 2006, "Connectionist
//     Temporal Classification"; https://pytorch.org/docs/stable/generated/torch.nn.CTCLoss.html):
//     log_probs [T, N, C] (log-softmax over C; float32 or float64, CPU or CUDA), targets
//     [N, S] padded or [sum(target_lengths)] concatenated (integral; used as int64 on
//     log_probs' device), input_lengths and target_lengths [N] (integral, read on the host).
//     Returns [N], log_probs' dtype and device.
//   pt2rt::ctc_loss_backward(Tensor grad, Tensor log_probs, Tensor targets,
//       Tensor input_lengths, Tensor target_lengths, int blank, bool zero_infinity) -> Tensor
//     The gradient of log_probs, [T, N, C], for grad [N]: RECOMPUTES _ctc_loss (its log_alpha,
//     [N, T, 2 * max(target_lengths) + 1], is never a saved activation: its size depends on the
//     lengths' values) and calls ATen's _ctc_loss_backward with it — the kernels eager
//     PyTorch's autograd runs, so the same values. On CUDA these are ATen's native CTC kernels;
//     eager takes cuDNN's where its conditions hold, whose values agree to rounding.
//
// Every dimension, size and dtype is checked first (an archive is untrusted: c10::Error naming
// what is wrong); ATen checks the lengths' values against T and the targets (a length past
// them is its c10::Error) and blank against C. Work and memory are ATen's: O(N T S). On meta
// tensors (the load-time check, meta_check.cpp) the kernels only compute the result shapes.
#pragma once

#include <ATen/core/stack.h>

namespace pt2rt {

extern const char* const kCtcLossSchema;
extern const char* const kCtcLossBackwardSchema;

/// Boxed kernels (NativeKernel): consume the arguments from `stack`, push the result.
void ctc_loss_kernel(torch::jit::Stack& stack);
void ctc_loss_backward_kernel(torch::jit::Stack& stack);

}  // namespace pt2rt
