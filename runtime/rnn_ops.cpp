// runtime/rnn_ops.cpp — see rnn_ops.h.
#include "rnn_ops.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/lstm.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>

#include <vector>

namespace pt2rt {

const char* const kLstmSchema =
    "pt2rt::lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, "
    "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)";
const char* const kLstmBackwardSchema =
    "pt2rt::lstm_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor? grad_c_n, Tensor input, "
    "Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
    "bool bidirectional, bool batch_first) -> Tensor[]";

namespace {

using torch::jit::Stack;

/// The shared arguments of both ops (the last 9 on the stack), popped.
struct LstmArgs {
  at::Tensor input;
  std::vector<at::Tensor> hx, params;
  bool has_biases = true, train = false, bidirectional = false, batch_first = false;
  int64_t num_layers = 1;
  double dropout = 0;

  int64_t dirs() const { return bidirectional ? 2 : 1; }
  int64_t batch() const { return input.size(batch_first ? 0 : 1); }
  int64_t hidden() const { return hx[0].size(2); }
  std::vector<at::Tensor> leaves() const {
    std::vector<at::Tensor> all{input, hx[0], hx[1]};
    all.insert(all.end(), params.begin(), params.end());
    return all;
  }
};

LstmArgs pop_args(Stack& s) {
  LstmArgs a;
  a.batch_first = s.back().toBool(); s.pop_back();
  a.bidirectional = s.back().toBool(); s.pop_back();
  a.train = s.back().toBool(); s.pop_back();
  a.dropout = s.back().toDouble(); s.pop_back();
  a.num_layers = s.back().toInt(); s.pop_back();
  a.has_biases = s.back().toBool(); s.pop_back();
  a.params = s.back().toTensorVector(); s.pop_back();
  a.hx = s.back().toTensorVector(); s.pop_back();
  a.input = s.back().toTensor(); s.pop_back();
  return a;
}

void check_like(const at::Tensor& t, const at::Tensor& input, const char* what, int64_t i) {
  TORCH_CHECK(t.defined() && t.scalar_type() == input.scalar_type() && t.device() == input.device(),
              "pt2rt::lstm: ", what, i >= 0 ? " " + std::to_string(i) : std::string(),
              " must be a ", input.scalar_type(), " tensor on ", input.device(), " like input");
}

void check_sizes(const at::Tensor& t, std::vector<int64_t> want, const char* what, int64_t i) {
  TORCH_CHECK(t.sizes() == c10::IntArrayRef(want), "pt2rt::lstm: ", what, " ", i, " has sizes ",
              t.sizes(), ", expected ", c10::IntArrayRef(want));
}

/// Everything at::lstm assumes of its arguments (rnn_ops.h's layout); c10::Error otherwise.
void check(const LstmArgs& a) {
  TORCH_CHECK(a.input.defined() && a.input.dim() == 3 && a.input.is_floating_point(),
              "pt2rt::lstm: input must be a floating-point tensor with 3 dims");
  TORCH_CHECK(a.hx.size() == 2, "pt2rt::lstm: hx must be [h_0, c_0], got ", a.hx.size(), " tensors");
  TORCH_CHECK(a.num_layers >= 1 && a.num_layers <= 1024, "pt2rt::lstm: num_layers ", a.num_layers,
              " is outside [1, 1024]");
  TORCH_CHECK(a.dropout >= 0 && a.dropout <= 1, "pt2rt::lstm: dropout ", a.dropout,
              " is outside [0, 1]");
  TORCH_CHECK(!(a.train && a.dropout > 0 && a.num_layers > 1),
              "pt2rt::lstm: dropout between layers in training mode is not supported "
              "(lstm_backward's recomputation would draw new masks)");
  const int64_t per = a.has_biases ? 4 : 2;
  TORCH_CHECK(static_cast<int64_t>(a.params.size()) == a.num_layers * a.dirs() * per,
              "pt2rt::lstm: expected ", a.num_layers * a.dirs() * per, " params for ", a.num_layers,
              " layers x ", a.dirs(), " directions, got ", a.params.size());
  for (int64_t i = 0; i < 2; ++i) {
    check_like(a.hx[i], a.input, i == 0 ? "h_0" : "c_0", -1);
    TORCH_CHECK(a.hx[i].dim() == 3, "pt2rt::lstm: hx ", i, " must have 3 dims");
  }
  const int64_t h = a.hidden();
  TORCH_CHECK(h >= 1, "pt2rt::lstm: hidden size must be >= 1");
  for (int64_t i = 0; i < 2; ++i) check_sizes(a.hx[i], {a.num_layers * a.dirs(), a.batch(), h}, "hx", i);
  for (int64_t l = 0; l < a.num_layers; ++l) {
    const int64_t in = l == 0 ? a.input.size(2) : a.dirs() * h;
    for (int64_t d = 0; d < a.dirs(); ++d) {
      const int64_t base = (l * a.dirs() + d) * per;
      const std::vector<std::vector<int64_t>> want = {{4 * h, in}, {4 * h, h}, {4 * h}, {4 * h}};
      for (int64_t k = 0; k < per; ++k) {
        check_like(a.params[base + k], a.input, "param", base + k);
        check_sizes(a.params[base + k], want[k], "param", base + k);
      }
    }
  }
}

void push_list(Stack& s, std::vector<at::Tensor> v) { s.emplace_back(c10::List<at::Tensor>(v)); }

}  // namespace

void lstm_kernel(Stack& s) {
  LstmArgs a = pop_args(s);
  check(a);
  if (a.input.is_meta()) {
    const auto opts = a.input.options();
    s.emplace_back(at::empty({a.input.size(0), a.input.size(1), a.dirs() * a.hidden()}, opts));
    s.emplace_back(at::empty(a.hx[0].sizes(), opts));
    s.emplace_back(at::empty(a.hx[1].sizes(), opts));
    return;
  }
  c10::AutoGradMode no_grad(false);
  auto [out, h, c] = at::lstm(a.input, a.hx, a.params, a.has_biases, a.num_layers, a.dropout,
                              a.train, a.bidirectional, a.batch_first);
  s.emplace_back(out.contiguous());
  s.emplace_back(h.contiguous());
  s.emplace_back(c.contiguous());
}

void lstm_backward_kernel(Stack& s) {
  LstmArgs a = pop_args(s);
  std::vector<at::Tensor> grads_in(3);
  for (int k = 2; k >= 0; --k) {
    if (!s.back().isNone()) grads_in[k] = s.back().toTensor();
    s.pop_back();
  }
  check(a);
  const std::vector<at::Tensor> like = {a.input, a.hx[0], a.hx[1]};
  for (int k = 0; k < 3; ++k) {
    if (!grads_in[k].defined()) continue;
    const at::Tensor& want = k == 0 ? at::Tensor() : like[k];
    check_like(grads_in[k], a.input, "incoming gradient", k);
    if (k > 0) check_sizes(grads_in[k], want.sizes().vec(), "incoming gradient", k);
    if (k == 0) {
      check_sizes(grads_in[0], {a.input.size(0), a.input.size(1), a.dirs() * a.hidden()},
                  "incoming gradient", 0);
    }
  }
  std::vector<at::Tensor> leaves = a.leaves();
  if (a.input.is_meta()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : leaves) out.push_back(at::empty(t.sizes(), t.options()));
    push_list(s, std::move(out));
    return;
  }
  // The recomputation needs autograd: leaves that are ordinary (not inference) tensors.
  c10::InferenceMode not_inference(false);
  c10::AutoGradMode grad_mode(true);
  for (at::Tensor& t : leaves) {
    t = (t.is_inference() ? t.clone() : t.detach()).requires_grad_(true);
  }
  std::vector<at::Tensor> params(leaves.begin() + 3, leaves.end());
  auto [out, h, c] = at::lstm(leaves[0], {leaves[1], leaves[2]}, params, a.has_biases,
                              a.num_layers, a.dropout, a.train, a.bidirectional, a.batch_first);
  std::vector<at::Tensor> outs, grads;
  const at::Tensor results[3] = {out, h, c};
  for (int k = 0; k < 3; ++k) {
    if (!grads_in[k].defined()) continue;
    outs.push_back(results[k]);
    grads.push_back(grads_in[k]);
  }
  std::vector<at::Tensor> got(leaves.size());
  if (!outs.empty()) {
    got = torch::autograd::grad(outs, leaves, grads, /*retain_graph=*/false,
                                /*create_graph=*/false, /*allow_unused=*/true);
  }
  std::vector<at::Tensor> result;
  for (size_t i = 0; i < leaves.size(); ++i) {
    result.push_back(got[i].defined() ? got[i].detach() : at::zeros_like(leaves[i]).detach());
  }
  push_list(s, std::move(result));
}

}  // namespace pt2rt
