// runtime/kernels/rnn_ops.h — pt2rt's recurrent native ops: an nn.LSTM, nn.GRU or nn.RNN
// kept as one graph node, so that its sequence length can be dynamic (exporter/pt2rt/ops/rnn_ops.py
// emits them).
//
//   pt2rt::lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers,
//               float dropout, bool train, bool bidirectional, bool batch_first)
//       -> (Tensor, Tensor, Tensor)
//     ATen's `lstm.input` (https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html):
//     input [T, B, I] ([B, T, I] if batch_first), hx = [h_0, c_0] each [num_layers * D, B, H]
//     (D = 2 if bidirectional else 1), params = nn.LSTM._flat_weights: per layer and direction
//     w_ih [4H, I_l], w_hh [4H, H] (+ b_ih [4H], b_hh [4H] if has_biases), I_0 = I,
//     I_l = D * H after. Returns (output [T, B, D * H] or [B, T, D * H], h_n, c_n), contiguous.
//   pt2rt::lstm_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor? grad_c_n, Tensor input,
//                        Tensor[] hx, Tensor[] params, <the same flags>) -> Tensor[]
//     [grad_input, grad_h_0, grad_c_0, grad_params...] (each like its forward input), by
//     torch::autograd::grad through the forward's own autograd graph: a training-mode forward
//     (train = true, outside c10::InferenceMode) runs at::lstm under autograd, as eager does,
//     and keeps its graph in a ForwardStash (forward_stash.h) keyed by its arguments; when the
//     backward is not handed exactly those, unchanged, it recomputes the forward under autograd
//     (activation checkpointing: Chen et al. 2016, "Training Deep Nets with Sublinear Memory
//     Cost"; torch.utils.checkpoint). Either way the same ATen kernels run in the same order as
//     eager PyTorch. A None incoming gradient counts as zeros.
//   pt2rt::gru / pt2rt::rnn_tanh / pt2rt::rnn_relu(Tensor input, Tensor hx, Tensor[] params,
//       <the same flags>) -> (Tensor, Tensor)
//     ATen's `gru.input` / `rnn_tanh.input` / `rnn_relu.input`
//     (https://pytorch.org/docs/stable/generated/torch.nn.GRU.html, .../torch.nn.RNN.html):
//     hx = h_0 [num_layers * D, B, H]; params as above with 3H (GRU) or H (RNN) rows per
//     weight instead of 4H. Returns (output, h_n), contiguous.
//   pt2rt::<gru|rnn_tanh|rnn_relu>_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor input,
//       Tensor hx, Tensor[] params, <the same flags>) -> Tensor[]
//     [grad_input, grad_h_0, grad_params...], recomputed as lstm_backward is.
//
// On CUDA, where cuDNN accepts the input, forward and backward run cuDNN's fused kernels as
// eager PyTorch does (`_cudnn_rnn` / `_cudnn_rnn_backward`, the backward reusing the forward's
// reserve space when it can: cudnn_rnn.h); elsewhere ATen's `lstm` / `gru` / `rnn_*`.
//
// Every kernel checks every size, dtype and device against the layout above (an archive is
// untrusted: c10::Error naming what is wrong) and refuse dropout between layers in training
// mode (a recomputation would draw new masks). On meta tensors (the load-time check,
// meta_check.cpp) they only compute the result shapes.
#pragma once

#include <ATen/core/stack.h>

#include <cstddef>

namespace pt2rt {

extern const char* const kLstmSchema;
extern const char* const kLstmBackwardSchema;
extern const char* const kGruSchema;
extern const char* const kGruBackwardSchema;
extern const char* const kRnnTanhSchema;
extern const char* const kRnnTanhBackwardSchema;
extern const char* const kRnnReluSchema;
extern const char* const kRnnReluBackwardSchema;

/// Boxed kernels (NativeKernel): consume the arguments from `stack`, push the results.
void lstm_kernel(torch::jit::Stack& stack);
void lstm_backward_kernel(torch::jit::Stack& stack);
void gru_kernel(torch::jit::Stack& stack);
void gru_backward_kernel(torch::jit::Stack& stack);
void rnn_tanh_kernel(torch::jit::Stack& stack);
void rnn_tanh_backward_kernel(torch::jit::Stack& stack);
void rnn_relu_kernel(torch::jit::Stack& stack);
void rnn_relu_backward_kernel(torch::jit::Stack& stack);

/// Forwards whose backward has not come yet, kept by the ops' ForwardStashes (tests).
size_t rnn_stash_size();

}  // namespace pt2rt
