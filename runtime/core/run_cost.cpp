// runtime/core/run_cost.cpp — see run_cost.h.
#include "core/run_cost.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace pt2rt {

uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

uint64_t sat_mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

namespace {

uint64_t u(int64_t v) { return v > 0 ? static_cast<uint64_t>(v) : 0; }

/// ATen's and pt2rt's whole-sequence RNN ops (op names without the namespace).
bool is_recurrent_backward(const std::string& n) {
  return n == "lstm_backward" || n == "gru_backward" || n == "rnn_tanh_backward" ||
         n == "rnn_relu_backward";
}
bool is_recurrent(const std::string& n) {
  return n == "lstm" || n == "gru" || n == "rnn_tanh" || n == "rnn_relu" ||
         is_recurrent_backward(n);
}

uint64_t log2_ceil(uint64_t n) {
  uint64_t l = 1;
  while (l < 64 && (uint64_t{1} << l) < n) ++l;
  return l;
}

/// The arguments and results of one call, by schema name.
class Call {
 public:
  Call(const c10::FunctionSchema& schema, const torch::jit::Stack& args,
       const torch::jit::Stack& results)
      : schema_(schema), args_(args), results_(results) {
    const std::string& full = schema.name();
    const size_t colon = full.find("::");
    name_ = colon == std::string::npos ? full : full.substr(colon + 2);
  }

  const std::string& name() const { return name_; }
  bool name_has(const char* part) const { return name_.find(part) != std::string::npos; }
  bool name_starts(const char* prefix) const { return name_.rfind(prefix, 0) == 0; }

  /// The argument named `n`, or nullptr.
  const c10::IValue* arg(const char* n) const {
    const auto& sargs = schema_.arguments();
    for (size_t i = 0; i < sargs.size() && i < args_.size(); ++i) {
      if (sargs[i].name() == n) return &args_[i];
    }
    return nullptr;
  }
  /// The tensor argument named `n` (undefined when absent or not a tensor).
  at::Tensor tensor(const char* n) const {
    const c10::IValue* v = arg(n);
    return v && v->isTensor() ? v->toTensor() : at::Tensor();
  }
  /// The `pos`-th tensor argument (undefined when there are fewer).
  at::Tensor nth_tensor(size_t pos) const {
    for (const c10::IValue& v : args_) {
      if (v.isTensor() && v.toTensor().defined() && pos-- == 0) return v.toTensor();
    }
    return at::Tensor();
  }

  /// Visits every defined tensor among the arguments (lists included) or the results.
  template <typename F>
  static void each_tensor(const torch::jit::Stack& stack, F f) {
    for (const c10::IValue& v : stack) {
      if (v.isTensor()) {
        if (v.toTensor().defined()) f(v.toTensor());
      } else if (v.isTensorList()) {
        for (const at::Tensor& t : v.toTensorVector()) {
          if (t.defined()) f(t);
        }
      } else if (v.isList()) {
        for (const c10::IValue& e : v.toListRef()) {
          if (e.isTensor() && e.toTensor().defined()) f(e.toTensor());
        }
      }
    }
  }
  template <typename F> void each_arg_tensor(F f) const { each_tensor(args_, f); }
  template <typename F> void each_result_tensor(F f) const { each_tensor(results_, f); }

  uint64_t arg_elements() const {
    uint64_t n = 0;
    each_arg_tensor([&](const at::Tensor& t) { n = sat_add(n, u(t.numel())); });
    return n;
  }
  uint64_t result_elements() const {
    uint64_t n = 0;
    each_result_tensor([&](const at::Tensor& t) { n = sat_add(n, u(t.numel())); });
    return n;
  }
  uint64_t largest_elements() const {
    uint64_t n = 0;
    auto f = [&](const at::Tensor& t) { n = std::max(n, u(t.numel())); };
    each_arg_tensor(f);
    each_result_tensor(f);
    return n;
  }
  uint64_t first_result_elements() const {
    uint64_t n = 0;
    bool first = true;
    each_result_tensor([&](const at::Tensor& t) {
      if (first) n = u(t.numel());
      first = false;
    });
    return n;
  }

 private:
  const c10::FunctionSchema& schema_;
  const torch::jit::Stack& args_;
  const torch::jit::Stack& results_;
  std::string name_;
};

uint64_t last_dim(const at::Tensor& t, int64_t from_end = 1) {
  return t.defined() && t.dim() >= from_end ? u(t.size(t.dim() - from_end)) : 1;
}

/// Multiply-adds of contractions: output elements × contraction length.
uint64_t contraction_work(const Call& c) {
  const std::string& n = c.name();
  if (n == "mm" || n == "addmm" || n == "bmm" || n == "baddbmm" || n == "addbmm" ||
      n == "_addmm_activation") {
    const at::Tensor a = c.tensor("mat1").defined() ? c.tensor("mat1")
                         : c.tensor("batch1").defined() ? c.tensor("batch1")
                                                        : c.tensor("self");
    const uint64_t k = last_dim(a);
    const uint64_t out = n == "addbmm" ? sat_mul(c.first_result_elements(), u(a.defined() ? a.size(0) : 1))
                                       : c.first_result_elements();
    return sat_mul(out, k);
  }
  if (n == "matmul" || n == "linear" || n == "_matmul") {
    const at::Tensor a = c.nth_tensor(0);
    return sat_mul(c.first_result_elements(), last_dim(a));
  }
  if (n == "einsum") {
    // Every distinct index letter spans one dimension: the work is the product of all sizes.
    const c10::IValue* eq = c.arg("equation");
    const c10::IValue* ops = c.arg("tensors");
    if (!eq || !eq->isString() || !ops) return 0;
    const std::string lhs = eq->toStringRef().substr(0, eq->toStringRef().find("->"));
    std::vector<uint64_t> size(128, 0);
    size_t op_index = 0, pos = 0;
    const std::vector<at::Tensor> ts = ops->isTensorList() ? ops->toTensorVector()
                                                           : std::vector<at::Tensor>();
    uint64_t ellipsis = 1;
    for (size_t i = 0; i <= lhs.size() && op_index < ts.size(); ++i) {
      if (i == lhs.size() || lhs[i] == ',') {
        ++op_index;
        pos = 0;
        continue;
      }
      const char ch = lhs[i];
      const at::Tensor& t = ts[op_index];
      if (ch == '.') {
        if (lhs.compare(i, 3, "...") == 0) {
          size_t letters = 0;
          for (size_t j = i; j < lhs.size() && lhs[j] != ','; ++j) letters += std::isalpha(static_cast<unsigned char>(lhs[j])) ? 1 : 0;
          const int64_t span = t.dim() - static_cast<int64_t>(letters);
          uint64_t e = 1;
          for (int64_t d = 0; d < span; ++d) e = sat_mul(e, u(t.size(pos + d)));
          ellipsis = std::max(ellipsis, e);
          pos += span > 0 ? static_cast<size_t>(span) : 0;
          i += 2;
        }
        continue;
      }
      if (ch == ' ' || pos >= static_cast<size_t>(t.dim())) continue;
      const auto idx = static_cast<unsigned char>(ch) & 127;
      size[idx] = std::max(size[idx], u(t.size(pos++)));
    }
    uint64_t w = ellipsis;
    for (uint64_t s : size) {
      if (s > 0) w = sat_mul(w, s);
    }
    return w;
  }
  if (n == "tensordot") {
    const at::Tensor a = c.tensor("self"), b = c.tensor("other");
    const c10::IValue* dims = c.arg("dims_other");
    uint64_t contracted = 1;
    if (b.defined() && dims && dims->isIntList()) {
      for (int64_t d : dims->toIntVector()) {
        if (d >= -b.dim() && d < b.dim()) contracted = sat_mul(contracted, u(b.size(d)));
      }
    }
    return a.defined() && b.defined()
               ? sat_mul(u(a.numel()), u(b.numel()) / std::max<uint64_t>(contracted, 1))
               : 0;
  }
  if (n == "bilinear") {
    const at::Tensor in = c.tensor("input1"), w = c.tensor("weight");
    return in.defined() && w.defined() ? sat_mul(u(in.numel()) / std::max<uint64_t>(last_dim(in), 1), u(w.numel())) : 0;
  }
  if (n == "_trilinear") {
    // Each input is unsqueezed at its expand dims; the kernel multiplies over the broadcast
    // index space of all three, then sums `sumdim`.
    std::vector<uint64_t> full;
    const char* names[3][2] = {{"i1", "expand1"}, {"i2", "expand2"}, {"i3", "expand3"}};
    for (auto& nm : names) {
      const at::Tensor t = c.tensor(nm[0]);
      const c10::IValue* e = c.arg(nm[1]);
      if (!t.defined() || !e || !e->isIntList()) return 0;
      std::vector<int64_t> exp = e->toIntVector();
      const size_t rank = static_cast<size_t>(t.dim()) + exp.size();
      std::vector<uint64_t> sizes(rank, 1);
      std::vector<bool> expanded(rank, false);
      for (int64_t d : exp) {
        if (d >= 0 && static_cast<size_t>(d) < rank) expanded[static_cast<size_t>(d)] = true;
      }
      size_t src = 0;
      for (size_t d = 0; d < rank && src < static_cast<size_t>(t.dim()); ++d) {
        if (!expanded[d]) sizes[d] = u(t.size(static_cast<int64_t>(src++)));
      }
      if (full.size() < rank) full.resize(rank, 1);
      for (size_t d = 0; d < rank; ++d) full[d] = std::max(full[d], sizes[d]);
    }
    uint64_t w = 1;
    for (uint64_t s : full) w = sat_mul(w, s);
    return w;
  }
  if (c.name_has("cdist") || n == "pdist" || n == "_pdist_forward" || n == "_pdist_backward") {
    const at::Tensor a = c.nth_tensor(0), b = c.nth_tensor(1);
    if (n.find("pdist") != std::string::npos) {
      return sat_mul(sat_mul(u(a.numel()), a.dim() >= 2 ? u(a.size(0)) : 1), 1);
    }
    return sat_mul(sat_mul(u(a.numel()), b.defined() && b.dim() >= 2 ? u(b.size(-2)) : 1), 2);
  }
  const at::Tensor q = c.tensor("query"), k = c.tensor("key");
  if (q.defined() && k.defined()) {  // attention: scores and the weighted sum
    return sat_mul(sat_mul(u(q.numel()), k.dim() >= 2 ? u(k.size(-2)) : 1), 2);
  }
  return 0;
}

uint64_t conv_work(const Call& c, uint64_t* scratch_bytes, uint64_t* reorder_bytes) {
  const at::Tensor w = c.tensor("weight");
  if (!c.name_has("conv") || !w.defined() || w.dim() < 2 || w.size(0) <= 0) return 0;
  const uint64_t per_channel = u(w.numel()) / u(w.size(0));
  const uint64_t largest = c.largest_elements();
  // im2col: the unfolded input, (input channels / groups) × kernel volume per position of
  // the larger side, for the whole batch (LibTorch's slow_conv2d unfolds every sample).
  *scratch_bytes = sat_mul(sat_mul(largest / u(w.size(0)), per_channel), u(w.element_size()));
  // oneDNN (mkldnn) reorders the weight into a blocked layout (OIhw16i16o and kin) whose
  // per-group output and input channel counts are padded to multiples of 16: a depthwise
  // [C, 1, k, k] weight becomes C × 16 × 16 × k² elements, 256 times its size (convnext's
  // 7×7 depthwise backward: 38.5 MB for a 150 kB weight).
  const c10::IValue* g = c.arg("groups");
  const uint64_t groups = g && g->isInt() && g->toInt() > 0 ? u(g->toInt()) : 1;
  const auto pad16 = [](uint64_t n) { return sat_mul((sat_add(n, 15)) / 16, 16); };
  const uint64_t kernel = w.size(1) > 0 ? per_channel / u(w.size(1)) : 0;
  *reorder_bytes = sat_mul(
      sat_mul(sat_mul(groups, pad16(u(w.size(0)) / groups)), pad16(u(w.size(1)))),
      sat_mul(kernel, u(w.element_size())));
  return sat_mul(sat_mul(largest, per_channel), c.name_has("backward") ? 2 : 1);
}

uint64_t pooling_work(const Call& c) {
  const c10::IValue* k = c.arg("kernel_size");
  if (!k || !k->isIntList()) return 0;
  const std::vector<int64_t> ks = k->toIntVector();
  const at::Tensor in = c.nth_tensor(0);
  const int64_t spatial = in.defined() ? std::max<int64_t>(in.dim() - 2, 1) : 1;
  uint64_t window = 1;
  for (int64_t d = 0; d < spatial; ++d) {
    window = sat_mul(window, u(ks.empty() ? 1 : ks[std::min<size_t>(d, ks.size() - 1)]));
  }
  return sat_mul(c.largest_elements(), window);
}

bool cubic_linear_algebra(const std::string& n) {
  static const char* const kNames[] = {
      "cholesky", "cholesky_inverse", "cholesky_solve", "inverse", "det", "logdet", "slogdet",
      "svd", "qr", "geqrf", "orgqr", "ormqr", "lu_solve", "lu_unpack", "_lu_with_info",
      "triangular_solve", "symeig", "eig", "matrix_exp", "matrix_power", "pinverse", "lstsq",
      "solve", "nuclear_norm", "matrix_rank", "_symeig_helper", "_svd_helper", "_cholesky_solve_helper",
      "_linalg_check_errors", "linalg_multi_dot", "chain_matmul", "_det_lu_based_helper"};
  if (n.rfind("linalg_", 0) == 0 || n.rfind("_linalg_", 0) == 0) return true;
  for (const char* k : kNames) {
    if (n == k) return true;
  }
  return false;
}

uint64_t linear_algebra_work(const Call& c) {
  if (!cubic_linear_algebra(c.name())) return 0;
  uint64_t w = 0;
  c.each_arg_tensor([&](const at::Tensor& t) {
    const uint64_t n = std::max(last_dim(t, 1), t.dim() >= 2 ? last_dim(t, 2) : 1);
    const uint64_t batch = u(t.numel()) / std::max<uint64_t>(sat_mul(last_dim(t, 1), t.dim() >= 2 ? last_dim(t, 2) : 1), 1);
    w = sat_add(w, sat_mul(sat_mul(std::max<uint64_t>(batch, 1), sat_mul(n, n)), n));
  });
  // matrix_exp and matrix_power multiply up to ~64 times (squaring).
  if (c.name() == "matrix_exp" || c.name() == "matrix_power" || c.name() == "linalg_matrix_exp" ||
      c.name() == "linalg_matrix_power") {
    w = sat_mul(w, 64);
  }
  return w;
}

uint64_t other_superlinear_work(const Call& c) {
  const std::string& n = c.name();
  if (n == "sort" || n == "argsort" || n == "msort" || n == "topk" || n == "kthvalue" ||
      n == "median" || n == "nanmedian" || n == "mode" || n == "quantile" || n == "nanquantile" ||
      n == "searchsorted" || n == "bucketize" || c.name_has("fft") || n == "stft" || n == "istft") {
    const uint64_t e = c.largest_elements();
    return sat_mul(e, log2_ceil(e));
  }
  if (is_recurrent(n) || c.name_has("_cell")) {
    // Every step multiplies each of the T x B rows by every weight: T * B * sum(params) ~
    // 4 * T * B * H * (I + H) * layers * directions multiply-adds (arguments other than the
    // weights, counted too, only add). pt2rt::lstm_backward recomputes the forward, then
    // differentiates it (about twice the forward's work): three times the forward.
    const at::Tensor in = c.tensor("input").defined() ? c.tensor("input") : c.nth_tensor(0);
    const uint64_t steps = in.defined() ? u(in.numel()) / std::max<uint64_t>(last_dim(in), 1) : 1;
    uint64_t params = 0;
    c.each_arg_tensor([&](const at::Tensor& t) { params = sat_add(params, u(t.numel())); });
    return sat_mul(sat_mul(std::max<uint64_t>(steps, 1), params), is_recurrent_backward(n) ? 3 : 1);
  }
  if (c.name_has("embedding_bag")) {
    const at::Tensor w = c.tensor("weight"), idx = c.tensor("indices");
    return w.defined() && idx.defined() ? sat_mul(u(idx.numel()), last_dim(w)) : 0;
  }
  if (c.name_has("ctc_loss")) {
    const at::Tensor lp = c.tensor("log_probs"), tg = c.tensor("targets");
    if (!lp.defined() || !tg.defined() || lp.dim() < 2) return 0;
    return sat_mul(sat_mul(u(lp.size(0)), u(lp.size(1))), sat_add(sat_mul(u(tg.numel()), 2), 1));
  }
  return 0;
}

/// pt2rt::lstm_backward (gru_backward, rnn_*_backward) recomputes the forward under autograd,
/// which keeps every step's activations until the gradients are taken: per row (T x B) and
/// layer-direction, the layer's input, the 4H gates and the cell and hidden states (~ I + 8H
/// elements; fewer for a GRU or RNN cell, counted alike).
uint64_t recurrent_scratch_bytes(const Call& c) {
  if (!is_recurrent_backward(c.name())) return 0;
  const at::Tensor in = c.tensor("input");
  const c10::IValue* hx = c.arg("hx");
  if (!in.defined() || !hx) return 0;
  at::Tensor h;
  if (hx->isTensor()) h = hx->toTensor();
  else if (hx->isTensorList() && !hx->toTensorVector().empty()) h = hx->toTensorVector()[0];
  if (!h.defined()) return 0;
  if (h.dim() != 3) return 0;
  const uint64_t rows = u(in.numel()) / std::max<uint64_t>(last_dim(in), 1);
  const uint64_t per_row = sat_add(last_dim(in), sat_mul(8, u(h.size(2))));
  return sat_mul(sat_mul(sat_mul(rows, u(h.size(0))), per_row), u(in.element_size()));
}

/// Attention (pt2rt::scaled_dot_product_attention and its backward) may hold the [..., L, S]
/// scores and probabilities: the math formulation on a LibTorch without SDPA, the fused
/// kernels' fallbacks, and a backward's recomputation all do.
uint64_t attention_scratch_bytes(const Call& c) {
  if (!c.name_has("scaled_dot_product_attention")) return 0;
  const at::Tensor q = c.tensor("query"), k = c.tensor("key");
  if (!q.defined() || !k.defined() || q.dim() < 2 || k.dim() < 2) return 0;
  const uint64_t rows = u(q.numel()) / std::max<uint64_t>(last_dim(q), 1);
  return sat_mul(sat_mul(sat_mul(rows, u(k.size(-2))), 2), u(q.element_size()));
}

}  // namespace

NodeCost node_cost(const c10::FunctionSchema& schema, const torch::jit::Stack& args,
                   const torch::jit::Stack& results) {
  const Call c(schema, args, results);
  NodeCost cost;
  cost.work = sat_add(kNodeOverhead, sat_add(c.arg_elements(), c.result_elements()));
  cost.work = sat_add(cost.work, contraction_work(c));
  cost.work = sat_add(cost.work, conv_work(c, &cost.scratch_bytes, &cost.reorder_bytes));
  if (!c.name_has("conv")) cost.work = sat_add(cost.work, pooling_work(c));
  cost.work = sat_add(cost.work, linear_algebra_work(c));
  cost.work = sat_add(cost.work, other_superlinear_work(c));
  cost.scratch_bytes = std::max(cost.scratch_bytes, recurrent_scratch_bytes(c));
  cost.scratch_bytes = std::max(cost.scratch_bytes, attention_scratch_bytes(c));
  return cost;
}

}  // namespace pt2rt
