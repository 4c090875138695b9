// runtime/kernels/rnn_args.h — the arguments shared by pt2rt's recurrent ops (rnn_ops.h's
// schemas): an nn.LSTM / nn.GRU / nn.RNN call as ATen's `lstm.input` / `gru.input` /
// `rnn_tanh.input` / `rnn_relu.input` take it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace pt2rt {

/// input [T, B, I] ([B, T, I] if batch_first); hx = [h_0] or [h_0, c_0] (LSTM), each
/// [num_layers * dirs, B, H]; params = nn.RNNBase._flat_weights (w_ih, w_hh[, b_ih, b_hh] per
/// layer and direction). Tensors are shared (not copied); all on the input's device.
struct RnnArgs {
  at::Tensor input;
  std::vector<at::Tensor> hx, params;
  bool has_biases = true, train = false, bidirectional = false, batch_first = false;
  int64_t num_layers = 1;
  double dropout = 0;

  int64_t dirs() const { return bidirectional ? 2 : 1; }
  int64_t batch() const { return input.size(batch_first ? 0 : 1); }
  int64_t hidden() const { return hx[0].size(2); }
  /// input, hx..., params... in that order (the backward's gradient order).
  std::vector<at::Tensor> leaves() const {
    std::vector<at::Tensor> all{input};
    all.insert(all.end(), hx.begin(), hx.end());
    all.insert(all.end(), params.begin(), params.end());
    return all;
  }
};

/// A ForwardStash tag (forward_stash.h) for the op `kind` (each caller's own numbering, < 16)
/// with these flags: a backward only finds a forward of the same op and flags.
inline uint64_t stash_tag(int64_t kind, const RnnArgs& a) {
  return static_cast<uint64_t>(kind) | (uint64_t{a.has_biases} << 4) |
         (uint64_t{a.bidirectional} << 5) | (uint64_t{a.batch_first} << 6) |
         (static_cast<uint64_t>(a.num_layers) << 8);
}

}  // namespace pt2rt
