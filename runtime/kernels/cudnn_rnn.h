// runtime/kernels/cudnn_rnn.h — pt2rt's recurrent ops on cuDNN's fused RNN kernels, as eager
// nn.LSTM / nn.GRU / nn.RNN run on CUDA.
//
// Eager PyTorch on CUDA calls ATen's `_cudnn_rnn` (forward, training mode: it also returns the
// "reserve" workspace) and `_cudnn_rnn_backward` on a weight buffer in cuDNN's layout that
// nn.RNNBase.flatten_parameters made once (`_cudnn_rnn_flatten_weight`;
// https://pytorch.org/docs/stable/generated/torch.nn.LSTM.html, cuDNN's cudnnRNNForward /
// cudnnRNNBackwardData_v8 / cudnnRNNBackwardWeights_v8). Here:
//  * the weight buffer is made by `_cudnn_rnn_flatten_weight` on copies of the parameters once
//    per parameter set (at most kFlatWeightCacheSize sets) and refreshed from the parameters
//    at every call — one concatenation kernel — since LibTorch's C++ optimizers write
//    parameters through Tensor::data(), unseen by version counters;
//  * a training-mode forward (the op's `train` flag, outside c10::InferenceMode) keeps
//    (output, h_n, c_n, reserve, weight buffer) in a ForwardStash keyed by its arguments; the
//    backward given the same, unchanged arguments calls `_cudnn_rnn_backward` on them; on a
//    miss (an eval-mode forward, retain_graph, an evicted entry) it re-runs the training-mode
//    forward first (activation checkpointing), so gradients never depend on the stash.
// Dropout between layers in training mode is refused before this is reached (rnn_ops.h), so
// the cuDNN dropout state is never needed (dropout 0).
// Devices: CUDA only (use_cudnn_rnn says when); every tensor on the input's device and dtype.
// Errors: c10::Error from ATen (shapes were checked by rnn_ops.cpp before).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <vector>

#include "kernels/rnn_args.h"

namespace pt2rt {

/// cuDNN's cudnnRNNMode_t, as ATen's `_cudnn_rnn` takes it.
enum class CudnnRnnMode : int64_t { RnnRelu = 0, RnnTanh = 1, Lstm = 2, Gru = 3 };

constexpr size_t kFlatWeightCacheSize = 16;
constexpr size_t kCudnnStashCapacity = 64;

/// Whether the op on `input` runs on cuDNN: a CUDA tensor that cuDNN accepts
/// (at::cudnn_is_acceptable: cuDNN compiled in and enabled, float16/32/64).
bool use_cudnn_rnn(const at::Tensor& input);

/// The forward: {output, h_n[, c_n]} (output [T, B, D*H], or [B, T, D*H] if batch_first, may
/// be a non-contiguous view).
std::vector<at::Tensor> cudnn_rnn_forward(CudnnRnnMode mode, const RnnArgs& a);

/// The backward: {grad_input, grad_h_0[, grad_c_0], grad_params...} for incoming gradients
/// `grads_in` = {grad_output, grad_h_n[, grad_c_n]} (undefined counts as zeros).
std::vector<at::Tensor> cudnn_rnn_backward(CudnnRnnMode mode, const RnnArgs& a,
                                           const std::vector<at::Tensor>& grads_in);

/// Entries the forward stash holds now (tests and diagnostics).
size_t cudnn_rnn_stash_size();

}  // namespace pt2rt
