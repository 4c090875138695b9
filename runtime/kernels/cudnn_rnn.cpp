// runtime/kernels/cudnn_rnn.cpp — see cudnn_rnn.h.
#include "kernels/cudnn_rnn.h"

#include <ATen/ops/_cudnn_rnn.h>
#include <ATen/ops/_cudnn_rnn_backward.h>
#include <ATen/ops/_cudnn_rnn_flatten_weight.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cudnn_is_acceptable.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <tuple>
#include <utility>

#include "kernels/forward_stash.h"

namespace pt2rt {
namespace {

int64_t weight_stride0(const RnnArgs& a) { return a.has_biases ? 4 : 2; }

uint64_t tag_of(CudnnRnnMode mode, const RnnArgs& a) {
  return stash_tag(static_cast<int64_t>(mode), a);
}

/// A weight buffer in cuDNN's layout and the parameter copies it was made from (views of it
/// when `_cudnn_rnn_flatten_weight` re-pointed them, as it does for nn.RNNBase).
struct FlatWeights {
  std::vector<TensorKey> keys;  ///< the parameters (their place: storage, offset, layout)
  std::vector<at::Tensor> views;
  at::Tensor buf;
  bool aliased = false;       ///< every view lies in buf: writing the views writes buf
  bool concatenated = false;  ///< buf is exactly the views one after another
};

std::mutex flat_mu;
std::deque<FlatWeights> flat_cache;  // least recently used first

ForwardStash& stash() {
  static ForwardStash s(kCudnnStashCapacity);
  return s;
}

FlatWeights flatten(CudnnRnnMode mode, const RnnArgs& a) {
  FlatWeights f;
  for (const at::Tensor& p : a.params) f.views.push_back(p.detach().clone(at::MemoryFormat::Contiguous));
  f.buf = at::_cudnn_rnn_flatten_weight(f.views, weight_stride0(a), a.input.size(2),
                                        static_cast<int64_t>(mode), a.hidden(), /*proj_size=*/0,
                                        a.num_layers, a.batch_first, a.bidirectional);
  const c10::StorageImpl* storage = f.buf.storage().unsafeGetStorageImpl();
  f.aliased = std::all_of(f.views.begin(), f.views.end(), [&](const at::Tensor& v) {
    return v.storage().unsafeGetStorageImpl() == storage && v.is_contiguous();
  });
  if (f.aliased) {
    int64_t offset = f.buf.storage_offset();
    f.concatenated = f.buf.is_contiguous();
    for (const at::Tensor& v : f.views) {
      f.concatenated = f.concatenated && v.storage_offset() == offset;
      offset += v.numel();
    }
    f.concatenated = f.concatenated && offset == f.buf.storage_offset() + f.buf.numel();
  }
  return f;
}

/// The parameters' current values into f's buffer. Every call does this (one concatenation
/// kernel, or one copy per parameter) rather than trusting version counters: LibTorch's C++
/// optimizers write parameters through Tensor::data(), which no version counter records
/// (plan/weight_cache.h), and a CUDA graph replay must read the weights of the moment.
void refresh(FlatWeights& f, const RnnArgs& a) {
  if (f.concatenated) {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& p : a.params) flat.push_back(p.detach().reshape({-1}));
    at::Tensor out = f.buf.view({-1});
    at::cat_out(out, flat, 0);
  } else {
    for (size_t i = 0; i < a.params.size(); ++i) f.views[i].copy_(a.params[i].detach());
  }
}

/// The weight buffer for a.params, holding their current values: (buf, weight list).
std::pair<at::Tensor, std::vector<at::Tensor>> flat_weights(CudnnRnnMode mode, const RnnArgs& a) {
  // The cached copies must be ordinary tensors whatever mode the call runs in.
  c10::InferenceMode not_inference(false);
  c10::AutoGradMode no_grad(false);
  std::optional<std::vector<TensorKey>> keys = keys_of(a.params);
  if (!keys) {  // inference-tensor parameters: made afresh (nothing to key a cache on)
    FlatWeights f = flatten(mode, a);
    return {f.buf, f.views};
  }
  std::lock_guard<std::mutex> lock(flat_mu);
  for (auto it = flat_cache.begin(); it != flat_cache.end(); ++it) {
    bool same_place = it->keys.size() == a.params.size();
    for (size_t i = 0; i < a.params.size() && same_place; ++i) {
      same_place = it->keys[i].same_place(a.params[i]) &&
                   it->views[i].scalar_type() == a.params[i].scalar_type();
    }
    if (!same_place) continue;
    FlatWeights f = std::move(*it);
    flat_cache.erase(it);
    if (f.aliased) refresh(f, a);
    else f = flatten(mode, a), f.keys = std::move(*keys);
    flat_cache.push_back(f);
    return {f.buf, f.views};
  }
  FlatWeights f = flatten(mode, a);
  f.keys = std::move(*keys);
  while (flat_cache.size() >= kFlatWeightCacheSize) flat_cache.pop_front();
  flat_cache.push_back(f);
  return {f.buf, f.views};
}

/// ATen's `_cudnn_rnn`: (output, h_n, c_n, reserve, weight_buf).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> run(
    CudnnRnnMode mode, const RnnArgs& a, const at::Tensor& buf,
    const std::vector<at::Tensor>& weights, bool train) {
  const at::Tensor cx = mode == CudnnRnnMode::Lstm ? a.hx[1].contiguous() : at::Tensor();
  return at::_cudnn_rnn(a.input.contiguous(), weights, weight_stride0(a), buf,
                        a.hx[0].contiguous(), cx, static_cast<int64_t>(mode), a.hidden(),
                        /*proj_size=*/0, a.num_layers, a.batch_first, /*dropout=*/0.0, train,
                        a.bidirectional, /*batch_sizes=*/{}, /*dropout_state=*/{});
}

}  // namespace

bool use_cudnn_rnn(const at::Tensor& input) {
  return input.is_cuda() && at::cudnn_is_acceptable(input);
}

std::vector<at::Tensor> cudnn_rnn_forward(CudnnRnnMode mode, const RnnArgs& a) {
  c10::AutoGradMode no_grad(false);
  auto [buf, weights] = flat_weights(mode, a);
  auto [output, hy, cy, reserve, weight_buf] = run(mode, a, buf, weights, a.train);
  if (a.train && !c10::InferenceMode::is_enabled()) {
    std::vector<at::Tensor> saved{output, reserve, buf};
    saved.insert(saved.end(), weights.begin(), weights.end());
    stash().put(tag_of(mode, a), a.leaves(), std::move(saved));
  } else if (!c10::InferenceMode::is_enabled()) {
    stash().forget(tag_of(mode, a), a.leaves());
  }
  if (mode == CudnnRnnMode::Lstm) return {output, hy, cy};
  return {output, hy};
}

std::vector<at::Tensor> cudnn_rnn_backward(CudnnRnnMode mode, const RnnArgs& a,
                                           const std::vector<at::Tensor>& grads_in) {
  c10::AutoGradMode no_grad(false);
  at::Tensor output, reserve, buf;
  std::vector<at::Tensor> weights;
  if (std::optional<std::vector<at::Tensor>> saved = stash().take(tag_of(mode, a), a.leaves())) {
    output = (*saved)[0];
    reserve = (*saved)[1];
    buf = (*saved)[2];
    weights.assign(saved->begin() + 3, saved->end());
  } else {  // recompute the training-mode forward (no dropout: see cudnn_rnn.h)
    std::tie(buf, weights) = flat_weights(mode, a);
    auto results = run(mode, a, buf, weights, /*train=*/true);
    output = std::get<0>(results);
    reserve = std::get<3>(results);
  }
  const bool lstm = mode == CudnnRnnMode::Lstm;
  auto grad = [&](size_t k) {
    return k < grads_in.size() && grads_in[k].defined() ? grads_in[k].contiguous() : at::Tensor();
  };
  const at::Tensor cx = lstm ? a.hx[1].contiguous() : at::Tensor();
  auto [dx, dhx, dcx, dw] = at::_cudnn_rnn_backward(
      a.input.contiguous(), weights, weight_stride0(a), buf, a.hx[0].contiguous(), cx, output,
      grad(0), grad(1), lstm ? grad(2) : at::Tensor(), static_cast<int64_t>(mode), a.hidden(),
      /*proj_size=*/0, a.num_layers, a.batch_first, /*dropout=*/0.0, /*train=*/true,
      a.bidirectional, /*batch_sizes=*/{}, /*dropout_state=*/{}, reserve, {true, true, lstm, true});
  std::vector<at::Tensor> out{dx, dhx};
  if (lstm) out.push_back(dcx);
  out.insert(out.end(), dw.begin(), dw.end());
  return out;
}

size_t cudnn_rnn_stash_size() { return stash().size(); }

}  // namespace pt2rt
