// runtime/kernels/rnn_ops.cpp — see rnn_ops.h.
#include "kernels/rnn_ops.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gru.h>
#include <ATen/ops/lstm.h>
#include <ATen/ops/rnn_relu.h>
#include <ATen/ops/rnn_tanh.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>

#include <optional>
#include <vector>

#include "kernels/cudnn_rnn.h"
#include "kernels/forward_stash.h"
#include "kernels/rnn_args.h"

namespace pt2rt {

const char* const kLstmSchema =
    "pt2rt::lstm(Tensor input, Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, "
    "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor, Tensor)";
const char* const kLstmBackwardSchema =
    "pt2rt::lstm_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor? grad_c_n, Tensor input, "
    "Tensor[] hx, Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
    "bool bidirectional, bool batch_first) -> Tensor[]";

const char* const kGruSchema =
    "pt2rt::gru(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, "
    "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)";
const char* const kGruBackwardSchema =
    "pt2rt::gru_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor input, Tensor hx, "
    "Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
    "bool bidirectional, bool batch_first) -> Tensor[]";
const char* const kRnnTanhSchema =
    "pt2rt::rnn_tanh(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, "
    "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)";
const char* const kRnnTanhBackwardSchema =
    "pt2rt::rnn_tanh_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor input, Tensor hx, "
    "Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
    "bool bidirectional, bool batch_first) -> Tensor[]";
const char* const kRnnReluSchema =
    "pt2rt::rnn_relu(Tensor input, Tensor hx, Tensor[] params, bool has_biases, int num_layers, "
    "float dropout, bool train, bool bidirectional, bool batch_first) -> (Tensor, Tensor)";
const char* const kRnnReluBackwardSchema =
    "pt2rt::rnn_relu_backward(Tensor? grad_output, Tensor? grad_h_n, Tensor input, Tensor hx, "
    "Tensor[] params, bool has_biases, int num_layers, float dropout, bool train, "
    "bool bidirectional, bool batch_first) -> Tensor[]";

namespace {

using torch::jit::Stack;

/// The cell: its op name, hidden states (LSTM: h and c) and gate blocks per weight.
struct Cell {
  const char* name;
  int64_t states;
  int64_t gates;
};

constexpr Cell kCells[] = {{"pt2rt::lstm", 2, 4}, {"pt2rt::gru", 1, 3},
                           {"pt2rt::rnn_tanh", 1, 1}, {"pt2rt::rnn_relu", 1, 1}};
/// The same cells as cuDNN names them (cudnn_rnn.h).
constexpr CudnnRnnMode kCudnnModes[] = {CudnnRnnMode::Lstm, CudnnRnnMode::Gru,
                                        CudnnRnnMode::RnnTanh, CudnnRnnMode::RnnRelu};

/// `hx_list`: hx is Tensor[] (LSTM) rather than one Tensor.
RnnArgs pop_args(Stack& s, bool hx_list = true) {
  RnnArgs a;
  a.batch_first = s.back().toBool(); s.pop_back();
  a.bidirectional = s.back().toBool(); s.pop_back();
  a.train = s.back().toBool(); s.pop_back();
  a.dropout = s.back().toDouble(); s.pop_back();
  a.num_layers = s.back().toInt(); s.pop_back();
  a.has_biases = s.back().toBool(); s.pop_back();
  a.params = s.back().toTensorVector(); s.pop_back();
  if (hx_list) a.hx = s.back().toTensorVector();
  else a.hx = {s.back().toTensor()};
  s.pop_back();
  a.input = s.back().toTensor(); s.pop_back();
  return a;
}

void check_like(const Cell& cell, const at::Tensor& t, const at::Tensor& input, const char* what,
                int64_t i) {
  TORCH_CHECK(t.defined() && t.scalar_type() == input.scalar_type() && t.device() == input.device(),
              cell.name, ": ", what, i >= 0 ? " " + std::to_string(i) : std::string(),
              " must be a ", input.scalar_type(), " tensor on ", input.device(), " like input");
}

void check_sizes(const Cell& cell, const at::Tensor& t, std::vector<int64_t> want,
                 const char* what, int64_t i) {
  TORCH_CHECK(t.sizes() == c10::IntArrayRef(want), cell.name, ": ", what, " ", i, " has sizes ",
              t.sizes(), ", expected ", c10::IntArrayRef(want));
}

/// Everything at::lstm / gru / rnn_* assume of their arguments (rnn_ops.h's layout);
/// c10::Error otherwise.
void check(const Cell& cell, const RnnArgs& a) {
  TORCH_CHECK(a.input.defined() && a.input.dim() == 3 && a.input.is_floating_point(),
              cell.name, ": input must be a floating-point tensor with 3 dims");
  TORCH_CHECK(static_cast<int64_t>(a.hx.size()) == cell.states, cell.name, ": hx must be ",
              cell.states == 2 ? "[h_0, c_0]" : "h_0", ", got ", a.hx.size(), " tensors");
  TORCH_CHECK(a.num_layers >= 1 && a.num_layers <= 1024, cell.name, ": num_layers ",
              a.num_layers, " is outside [1, 1024]");
  TORCH_CHECK(a.dropout >= 0 && a.dropout <= 1, cell.name, ": dropout ", a.dropout,
              " is outside [0, 1]");
  TORCH_CHECK(!(a.train && a.dropout > 0 && a.num_layers > 1), cell.name,
              ": dropout between layers in training mode is not supported (the backward's "
              "recomputation would draw new masks)");
  const int64_t per = a.has_biases ? 4 : 2;
  TORCH_CHECK(static_cast<int64_t>(a.params.size()) == a.num_layers * a.dirs() * per, cell.name,
              ": expected ", a.num_layers * a.dirs() * per, " params for ", a.num_layers,
              " layers x ", a.dirs(), " directions, got ", a.params.size());
  for (int64_t i = 0; i < cell.states; ++i) {
    check_like(cell, a.hx[i], a.input, i == 0 ? "h_0" : "c_0", -1);
    TORCH_CHECK(a.hx[i].dim() == 3, cell.name, ": hx ", i, " must have 3 dims");
  }
  const int64_t h = a.hidden();
  TORCH_CHECK(h >= 1, cell.name, ": hidden size must be >= 1");
  for (int64_t i = 0; i < cell.states; ++i) {
    check_sizes(cell, a.hx[i], {a.num_layers * a.dirs(), a.batch(), h}, "hx", i);
  }
  const int64_t g = cell.gates * h;
  for (int64_t l = 0; l < a.num_layers; ++l) {
    const int64_t in = l == 0 ? a.input.size(2) : a.dirs() * h;
    for (int64_t d = 0; d < a.dirs(); ++d) {
      const int64_t base = (l * a.dirs() + d) * per;
      const std::vector<std::vector<int64_t>> want = {{g, in}, {g, h}, {g}, {g}};
      for (int64_t k = 0; k < per; ++k) {
        check_like(cell, a.params[base + k], a.input, "param", base + k);
        check_sizes(cell, a.params[base + k], want[k], "param", base + k);
      }
    }
  }
}

/// The cell's ATen op on (input, hx, params): its results (output, h_n[, c_n]).
std::vector<at::Tensor> run_cell(size_t kind, const at::Tensor& input,
                                 const std::vector<at::Tensor>& hx,
                                 const std::vector<at::Tensor>& params, const RnnArgs& a) {
  switch (kind) {
    case 0: {
      auto [out, h, c] = at::lstm(input, hx, params, a.has_biases, a.num_layers, a.dropout,
                                  a.train, a.bidirectional, a.batch_first);
      return {out, h, c};
    }
    case 1: {
      auto [out, h] = at::gru(input, hx[0], params, a.has_biases, a.num_layers, a.dropout,
                              a.train, a.bidirectional, a.batch_first);
      return {out, h};
    }
    case 2: {
      auto [out, h] = at::rnn_tanh(input, hx[0], params, a.has_biases, a.num_layers, a.dropout,
                                   a.train, a.bidirectional, a.batch_first);
      return {out, h};
    }
    default: {
      auto [out, h] = at::rnn_relu(input, hx[0], params, a.has_biases, a.num_layers, a.dropout,
                                   a.train, a.bidirectional, a.batch_first);
      return {out, h};
    }
  }
}

/// Training-mode forwards off cuDNN keep their autograd graph here for the backward.
constexpr size_t kGraphStashCapacity = 16;

ForwardStash& graph_stash() {
  static ForwardStash s(kGraphStashCapacity);
  return s;
}

/// The forward of a training-mode call (outside c10::InferenceMode) run under autograd, as
/// eager's is, on detached leaves; its graph is kept in graph_stash() for backward_kernel
/// (rnn_ops.h). Returns the results detached.
std::vector<at::Tensor> forward_keeping_graph(size_t kind, const RnnArgs& a) {
  const std::vector<at::Tensor> args = a.leaves();
  c10::AutoGradMode grad_mode(true);
  std::vector<at::Tensor> vars;
  for (const at::Tensor& t : args) vars.push_back(t.detach().requires_grad_(true));
  const auto first_param = vars.begin() + 1 + static_cast<int64_t>(a.hx.size());
  std::vector<at::Tensor> results =
      run_cell(kind, vars[0], std::vector<at::Tensor>(vars.begin() + 1, first_param),
               std::vector<at::Tensor>(first_param, vars.end()), a);
  std::vector<at::Tensor> saved = results;
  saved.insert(saved.end(), vars.begin(), vars.end());
  graph_stash().put(stash_tag(static_cast<int64_t>(kind), a), args, std::move(saved));
  for (at::Tensor& r : results) r = r.detach();
  return results;
}

void push_list(Stack& s, std::vector<at::Tensor> v) { s.emplace_back(c10::List<at::Tensor>(v)); }

template <size_t Kind>
void forward_kernel(Stack& s) {
  const Cell& cell = kCells[Kind];
  RnnArgs a = pop_args(s, Kind == 0);
  check(cell, a);
  if (a.input.is_meta()) {
    const auto opts = a.input.options();
    s.emplace_back(at::empty({a.input.size(0), a.input.size(1), a.dirs() * a.hidden()}, opts));
    for (const at::Tensor& h : a.hx) s.emplace_back(at::empty(h.sizes(), opts));
    return;
  }
  c10::AutoGradMode no_grad(false);
  std::vector<at::Tensor> results;
  if (use_cudnn_rnn(a.input)) {
    results = cudnn_rnn_forward(kCudnnModes[Kind], a);
  } else if (a.train && can_keep_graph(a.leaves())) {
    results = forward_keeping_graph(Kind, a);
  } else {
    if (!c10::InferenceMode::is_enabled()) {
      graph_stash().forget(stash_tag(static_cast<int64_t>(Kind), a), a.leaves());
    }
    results = run_cell(Kind, a.input, a.hx, a.params, a);
  }
  for (const at::Tensor& r : results) {
    s.emplace_back(r.contiguous());
  }
}

/// The gradients of (input, hx..., params...) by autograd: through the forward's own graph
/// when it kept one (forward_keeping_graph), else through a recomputation under autograd on
/// leaves that are ordinary (not inference) tensors. An unused leaf's gradient is undefined.
std::vector<at::Tensor> autograd_backward(size_t kind, const Cell& cell, const RnnArgs& a,
                                          const std::vector<at::Tensor>& grads_in) {
  const int64_t n = 1 + cell.states;
  std::vector<at::Tensor> leaves = a.leaves();
  c10::InferenceMode not_inference(false);
  c10::AutoGradMode grad_mode(true);
  std::vector<at::Tensor> results;
  if (std::optional<std::vector<at::Tensor>> saved =
          graph_stash().take(stash_tag(static_cast<int64_t>(kind), a), leaves)) {
    results.assign(saved->begin(), saved->begin() + n);
    leaves.assign(saved->begin() + n, saved->end());
  } else {
    for (at::Tensor& t : leaves) {
      t = (t.is_inference() ? t.clone() : t.detach()).requires_grad_(true);
    }
    const auto first_param = leaves.begin() + 1 + cell.states;
    results = run_cell(kind, leaves[0], std::vector<at::Tensor>(leaves.begin() + 1, first_param),
                       std::vector<at::Tensor>(first_param, leaves.end()), a);
  }
  std::vector<at::Tensor> outs, grads;
  for (int64_t k = 0; k < n; ++k) {
    if (!grads_in[k].defined()) continue;
    outs.push_back(results[k]);
    grads.push_back(grads_in[k]);
  }
  std::vector<at::Tensor> got(leaves.size());
  if (!outs.empty()) {
    got = torch::autograd::grad(outs, leaves, grads, /*retain_graph=*/false,
                                /*create_graph=*/false, /*allow_unused=*/true);
  }
  return got;
}

template <size_t Kind>
void backward_kernel(Stack& s) {
  const Cell& cell = kCells[Kind];
  RnnArgs a = pop_args(s, Kind == 0);
  const int64_t n = 1 + cell.states;  // incoming gradients: output, h_n[, c_n]
  std::vector<at::Tensor> grads_in(static_cast<size_t>(n));
  for (int64_t k = n - 1; k >= 0; --k) {
    if (!s.back().isNone()) grads_in[k] = s.back().toTensor();
    s.pop_back();
  }
  check(cell, a);
  for (int64_t k = 0; k < n; ++k) {
    if (!grads_in[k].defined()) continue;
    check_like(cell, grads_in[k], a.input, "incoming gradient", k);
    if (k > 0) check_sizes(cell, grads_in[k], a.hx[k - 1].sizes().vec(), "incoming gradient", k);
    if (k == 0) {
      check_sizes(cell, grads_in[0], {a.input.size(0), a.input.size(1), a.dirs() * a.hidden()},
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
  const std::vector<at::Tensor> got =
      use_cudnn_rnn(a.input) ? cudnn_rnn_backward(kCudnnModes[Kind], a, grads_in)
                             : autograd_backward(Kind, cell, a, grads_in);
  std::vector<at::Tensor> result;
  for (size_t i = 0; i < leaves.size(); ++i) {
    result.push_back(i < got.size() && got[i].defined() ? got[i].detach()
                                                        : at::zeros_like(leaves[i]).detach());
  }
  push_list(s, std::move(result));
}

}  // namespace

void lstm_kernel(Stack& s) { forward_kernel<0>(s); }
void lstm_backward_kernel(Stack& s) { backward_kernel<0>(s); }
void gru_kernel(Stack& s) { forward_kernel<1>(s); }
void gru_backward_kernel(Stack& s) { backward_kernel<1>(s); }
void rnn_tanh_kernel(Stack& s) { forward_kernel<2>(s); }
void rnn_tanh_backward_kernel(Stack& s) { backward_kernel<2>(s); }
void rnn_relu_kernel(Stack& s) { forward_kernel<3>(s); }
void rnn_relu_backward_kernel(Stack& s) { backward_kernel<3>(s); }

size_t rnn_stash_size() { return graph_stash().size() + cudnn_rnn_stash_size(); }

}  // namespace pt2rt
