// pt2rt's recurrent ops on cuDNN (runtime/kernels/cudnn_rnn.h), on a CUDA device only (the test
// returns with a warning elsewhere; scripts/gpu-check.sh runs it): forward and backward equal
// eager PyTorch's cuDNN RNN (ATen's lstm / gru / rnn_* under autograd on CUDA, which call
// `_cudnn_rnn` and `_cudnn_rnn_backward`), the backward reuses the forward's reserve (the stash
// empties), a second backward without it recomputes to the same gradients, and the cached weight
// buffer follows in-place parameter updates.
#include "catch_compat.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <string>

#include "kernels/cudnn_rnn.h"
#include "kernels/native_ops.h"

namespace pt2rt {
namespace {

torch::jit::Stack run(const std::string& name, torch::jit::Stack s) {
  const NativeOp* op = find_native_op(name.c_str(), "");
  REQUIRE(op != nullptr);
  op->kernel(s);
  return s;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> eager(const std::string& kind,
                                                     const std::vector<at::Tensor>& leaves,
                                                     bool batch_first) {
  const at::Tensor& x = leaves[0];
  if (kind == "lstm") {
    std::vector<at::Tensor> p(leaves.begin() + 3, leaves.end());
    return at::lstm(x, {leaves[1], leaves[2]}, p, true, 2, 0.0, true, true, batch_first);
  }
  std::vector<at::Tensor> p(leaves.begin() + 2, leaves.end());
  auto [out, h] = kind == "gru"        ? at::gru(x, leaves[1], p, true, 2, 0.0, true, true, batch_first)
                  : kind == "rnn_tanh" ? at::rnn_tanh(x, leaves[1], p, true, 2, 0.0, true, true, batch_first)
                                       : at::rnn_relu(x, leaves[1], p, true, 2, 0.0, true, true, batch_first);
  return {out, h, at::Tensor()};
}

void check_close(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  INFO(what << ": max |diff| " << (got - want).abs().max().item<double>());
  CHECK(got.sizes() == want.sizes());
  CHECK(at::allclose(got, want, 1e-5, 1e-6));
}

}  // namespace

TEST_CASE("cudnn_rnn: pt2rt's recurrent ops on CUDA are eager's cuDNN RNNs, forward and backward",
          "[cudnn_rnn][cuda]") {
  if (!at::hasCUDA()) {
    WARN("no CUDA device: pt2rt's cuDNN RNN path not exercised here");
    return;
  }
  const at::TensorOptions cuda = at::TensorOptions().device(at::kCUDA);
  for (const std::string kind : {"lstm", "gru", "rnn_tanh", "rnn_relu"}) {
    for (const bool batch_first : {false, true}) {
      INFO(kind << (batch_first ? " batch_first" : ""));
      at::manual_seed(0);
      const int64_t gates = kind == "lstm" ? 4 : kind == "gru" ? 3 : 1, H = 16, I = 8, B = 5,
                    T = 7, L = 2, D = 2;
      const at::Tensor input = batch_first ? at::randn({B, T, I}, cuda) : at::randn({T, B, I}, cuda);
      std::vector<at::Tensor> hx{at::randn({L * D, B, H}, cuda)};
      if (kind == "lstm") hx.push_back(at::randn({L * D, B, H}, cuda));
      std::vector<at::Tensor> params;
      for (int64_t l = 0; l < L; ++l) {
        for (int64_t d = 0; d < D; ++d) {
          params.push_back(at::randn({gates * H, l == 0 ? I : D * H}, cuda) * 0.1);
          params.push_back(at::randn({gates * H, H}, cuda) * 0.1);
          params.push_back(at::randn({gates * H}, cuda) * 0.1);
          params.push_back(at::randn({gates * H}, cuda) * 0.1);
        }
      }
      auto forward_args = [&] {
        torch::jit::Stack s{input};
        if (kind == "lstm") s.emplace_back(c10::List<at::Tensor>(hx));
        else s.emplace_back(hx[0]);
        s.emplace_back(c10::List<at::Tensor>(params));
        for (const c10::IValue v : {c10::IValue(true), c10::IValue(L), c10::IValue(0.0),
                                    c10::IValue(true), c10::IValue(true), c10::IValue(batch_first)}) {
          s.push_back(v);
        }
        return s;
      };
      std::vector<at::Tensor> leaves{input};
      leaves.insert(leaves.end(), hx.begin(), hx.end());
      leaves.insert(leaves.end(), params.begin(), params.end());
      for (at::Tensor& t : leaves) t = t.detach().clone().requires_grad_(true);
      const auto want = eager(kind, leaves, batch_first);

      const size_t stashed = cudnn_rnn_stash_size();
      const torch::jit::Stack out = run("pt2rt::" + kind, forward_args());
      CHECK(cudnn_rnn_stash_size() == stashed + 1);  // a training-mode forward keeps its reserve
      check_close(out[0].toTensor(), std::get<0>(want), "output");
      check_close(out[1].toTensor(), std::get<1>(want), "h_n");
      if (kind == "lstm") check_close(out[2].toTensor(), std::get<2>(want), "c_n");

      const at::Tensor g0 = at::randn_like(std::get<0>(want)), g1 = at::randn_like(std::get<1>(want));
      torch::jit::Stack args{g0, g1};
      if (kind == "lstm") args.emplace_back();  // grad_c_n None: zeros
      for (const c10::IValue& v : forward_args()) args.push_back(v);
      const auto ref = torch::autograd::grad({std::get<0>(want), std::get<1>(want)}, leaves,
                                             {g0, g1});
      for (int pass = 0; pass < 2; ++pass) {  // 0: the forward's reserve; 1: recomputed
        INFO((pass == 0 ? "reserve reused" : "recomputed"));
        const std::vector<at::Tensor> got =
            run("pt2rt::" + kind + "_backward", args)[0].toTensorVector();
        CHECK(cudnn_rnn_stash_size() == stashed);
        REQUIRE(got.size() == leaves.size());
        for (size_t i = 0; i < got.size(); ++i) check_close(got[i], ref[i], "gradient " + std::to_string(i));
      }

      // An optimizer-like in-place update: the cached weight buffer must follow it.
      for (at::Tensor& p : params) p.add_(0.01);
      std::vector<at::Tensor> updated(leaves.begin(), leaves.end());
      for (size_t i = 1 + hx.size(); i < updated.size(); ++i) {
        updated[i] = params[i - 1 - hx.size()].detach().clone().requires_grad_(true);
      }
      const auto want2 = eager(kind, updated, batch_first);
      const torch::jit::Stack out2 = run("pt2rt::" + kind, forward_args());
      check_close(out2[0].toTensor(), std::get<0>(want2), "output after an in-place update");
      run("pt2rt::" + kind + "_backward", args);  // takes out2's entry: the stash is as before
      CHECK(cudnn_rnn_stash_size() == stashed);
    }
  }
}

}  // namespace pt2rt
