// runtime/kernels/attention_ops.cpp — see attention_ops.h.
#include "kernels/attention_ops.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "core/libtorch_compat.h"
#include "kernels/forward_stash.h"

namespace pt2rt {

const char* const kAttentionSchema =
    "pt2rt::scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, "
    "Tensor? attn_mask, bool is_causal, float? scale, bool enable_gqa) -> Tensor";
const char* const kAttentionBackwardSchema =
    "pt2rt::scaled_dot_product_attention_backward(Tensor grad_out, Tensor query, Tensor key, "
    "Tensor value, Tensor? attn_mask, bool is_causal, float? scale, bool enable_gqa) "
    "-> Tensor[]";

namespace {

using torch::jit::Stack;
constexpr const char* kName = "pt2rt::scaled_dot_product_attention";

struct AttentionArgs {
  at::Tensor query, key, value;
  std::optional<at::Tensor> mask;
  bool is_causal = false, enable_gqa = false;
  std::optional<double> scale;

  /// query, key, value[, mask]: what the forward's identity is keyed on.
  std::vector<at::Tensor> tensors() const {
    std::vector<at::Tensor> all{query, key, value};
    if (mask) all.push_back(*mask);
    return all;
  }
};

AttentionArgs pop_args(Stack& s) {
  AttentionArgs a;
  a.enable_gqa = s.back().toBool(); s.pop_back();
  if (!s.back().isNone()) a.scale = s.back().toDouble();
  s.pop_back();
  a.is_causal = s.back().toBool(); s.pop_back();
  if (!s.back().isNone()) a.mask = s.back().toTensor();
  s.pop_back();
  a.value = s.back().toTensor(); s.pop_back();
  a.key = s.back().toTensor(); s.pop_back();
  a.query = s.back().toTensor(); s.pop_back();
  return a;
}

/// attention_ops.h's layout; c10::Error naming what is wrong.
void check(const AttentionArgs& a) {
  const at::Tensor& q = a.query;
  TORCH_CHECK(q.defined() && a.key.defined() && a.value.defined(), kName,
              ": query, key and value must be tensors");
  TORCH_CHECK(q.is_floating_point(), kName, ": query must be floating-point, got ",
              q.scalar_type());
  for (const at::Tensor* t : {&a.key, &a.value}) {
    TORCH_CHECK(t->scalar_type() == q.scalar_type() && t->device() == q.device(), kName,
                ": key and value must be ", q.scalar_type(), " tensors on ", q.device(),
                " like query");
  }
  const int64_t d = q.dim();
  TORCH_CHECK(d >= 2 && d <= 8 && a.key.dim() == d && a.value.dim() == d, kName,
              ": query, key and value must have the same number of dims, 2 to 8; got ", d, ", ",
              a.key.dim(), ", ", a.value.dim());
  TORCH_CHECK(a.key.size(-1) == q.size(-1), kName, ": key's last dim ", a.key.size(-1),
              " differs from query's ", q.size(-1));
  TORCH_CHECK(a.value.size(-2) == a.key.size(-2), kName, ": value has ", a.value.size(-2),
              " positions, key ", a.key.size(-2));
  const int64_t lead = a.enable_gqa ? d - 3 : d - 2;
  TORCH_CHECK(lead >= 0, kName, ": enable_gqa needs a heads dim (at least 3 dims)");
  for (int64_t i = 0; i < lead; ++i) {
    TORCH_CHECK(a.key.size(i) == q.size(i) && a.value.size(i) == q.size(i), kName,
                ": dim ", i, " of key and value must equal query's (", q.size(i), ")");
  }
  if (a.enable_gqa) {
    const int64_t h = a.key.size(-3);
    TORCH_CHECK(h >= 1 && a.value.size(-3) == h && q.size(-3) % h == 0, kName,
                ": with enable_gqa, key and value need the same number of heads, dividing "
                "query's ", q.size(-3));
  }
  if (a.mask) {
    const at::Tensor& m = *a.mask;
    TORCH_CHECK(m.device() == q.device() &&
                    (m.scalar_type() == at::kBool || m.scalar_type() == q.scalar_type()),
                kName, ": attn_mask must be a bool or ", q.scalar_type(), " tensor on ",
                q.device());
    TORCH_CHECK(m.dim() <= d, kName, ": attn_mask has more dims than query");
  }
  TORCH_CHECK(!a.scale || (std::isfinite(*a.scale) && *a.scale != 0), kName,
              ": scale must be finite and non-zero");
}

/// A tensor of the declared result's sizes and strides (attention_ops.h): like query's when
/// the head dims agree (at::empty_like's preserve rule, evaluated on the meta device: nothing
/// is allocated), else contiguous; on `device`.
at::Tensor declared(const AttentionArgs& a, c10::Device device) {
  const auto options = a.query.options().device(device);
  if (a.value.size(-1) == a.query.size(-1)) return at::empty_like(a.query, options);
  std::vector<int64_t> sizes = a.query.sizes().vec();
  sizes.back() = a.value.size(-1);
  return at::empty(sizes, options);
}

/// `out` itself when it has the declared layout (strides of dims of size 1 aside), else a
/// copy in it.
at::Tensor conform(const AttentionArgs& a, const at::Tensor& out) {
  const at::Tensor want = declared(a, at::kMeta);
  TORCH_CHECK(out.sizes() == want.sizes(), kName, ": the kernel returned sizes ", out.sizes(),
              ", expected ", want.sizes());
  bool same = true;
  for (int64_t i = 0; i < want.dim(); ++i) {
    same = same && (want.size(i) == 1 || out.stride(i) == want.stride(i));
  }
  if (same) return out;
  return at::empty_strided(want.sizes(), want.strides(), out.options()).copy_(out);
}

/// softmax(q kᵀ · scale + mask) v in ATen ops (torch's _scaled_dot_product_attention_math
/// without dropout), for a LibTorch without SDPA.
at::Tensor math_attention(const at::Tensor& q, at::Tensor k, at::Tensor v,
                          const AttentionArgs& a) {
  if (a.enable_gqa) {
    const int64_t repeat = q.size(-3) / k.size(-3);
    k = k.repeat_interleave(repeat, -3);
    v = v.repeat_interleave(repeat, -3);
  }
  const double scale = a.scale ? *a.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q.mul(scale), k.transpose(-2, -1));
  const double inf = std::numeric_limits<double>::infinity();
  if (a.is_causal) {
    const at::Tensor keep =
        at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).tril();
    scores = scores.masked_fill(keep.logical_not(), -inf);
  }
  if (a.mask) {
    scores = a.mask->scalar_type() == at::kBool
                 ? scores.masked_fill(a.mask->logical_not(), -inf)
                 : scores.add(*a.mask);
  }
  return at::matmul(at::softmax(scores, -1), v);
}

at::Tensor run(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const AttentionArgs& a) {
  if (std::optional<at::Tensor> out =
          aten_scaled_dot_product_attention(q, k, v, a.mask, a.is_causal, a.scale,
                                            a.enable_gqa)) {
    return *out;
  }
  return math_attention(q, k, v, a);
}

/// A ForwardStash tag: the flags and the scale's bits (a backward only finds a forward of the
/// same flags and scale).
uint64_t stash_tag(const AttentionArgs& a) {
  uint64_t bits = 0;
  if (a.scale) std::memcpy(&bits, &*a.scale, sizeof bits);
  bits = (bits ^ (bits >> 31)) * 0x9E3779B97F4A7C15ull;  // spread, then room for the flags
  return (bits << 4) | (uint64_t{a.is_causal} << 0) | (uint64_t{a.enable_gqa} << 1) |
         (uint64_t{a.scale.has_value()} << 2) | (uint64_t{a.mask.has_value()} << 3);
}

constexpr size_t kStashCapacity = 64;

ForwardStash& stash() {
  static ForwardStash s(kStashCapacity);
  return s;
}

}  // namespace

void attention_kernel(Stack& s) {
  AttentionArgs a = pop_args(s);
  check(a);
  if (a.query.is_meta()) {
    s.emplace_back(declared(a, at::kMeta));
    return;
  }
  const std::vector<at::Tensor> args = a.tensors();
  at::Tensor out;
  if (can_keep_graph(args)) {
    // As eager's forward: under autograd on detached leaves; the graph waits for the backward.
    c10::AutoGradMode grad_mode(true);
    std::vector<at::Tensor> leaves;
    for (const at::Tensor* t : {&a.query, &a.key, &a.value}) {
      leaves.push_back(t->detach().requires_grad_(true));
    }
    at::Tensor result = run(leaves[0], leaves[1], leaves[2], a);
    std::vector<at::Tensor> saved{result};
    saved.insert(saved.end(), leaves.begin(), leaves.end());
    stash().put(stash_tag(a), args, std::move(saved));
    out = result.detach();
  } else {
    if (!c10::InferenceMode::is_enabled()) stash().forget(stash_tag(a), args);
    c10::AutoGradMode no_grad(false);
    out = run(a.query, a.key, a.value, a);
  }
  s.emplace_back(conform(a, out));
}

void attention_backward_kernel(Stack& s) {
  AttentionArgs a = pop_args(s);
  const at::Tensor grad_out = s.back().toTensor();
  s.pop_back();
  check(a);
  std::vector<int64_t> sizes = a.query.sizes().vec();
  sizes.back() = a.value.size(-1);
  TORCH_CHECK(grad_out.defined() && grad_out.scalar_type() == a.query.scalar_type() &&
                  grad_out.device() == a.query.device() &&
                  grad_out.sizes() == c10::IntArrayRef(sizes),
              kName, "_backward: grad_out must be a ", a.query.scalar_type(), " tensor on ",
              a.query.device(), " of sizes ", c10::IntArrayRef(sizes));
  std::vector<at::Tensor> result;
  if (a.query.is_meta()) {
    for (const at::Tensor* t : {&a.query, &a.key, &a.value}) {
      result.push_back(at::empty(t->sizes(), t->options()));
    }
    s.emplace_back(c10::List<at::Tensor>(result));
    return;
  }
  c10::InferenceMode not_inference(false);
  c10::AutoGradMode grad_mode(true);
  at::Tensor out;
  std::vector<at::Tensor> leaves;
  if (std::optional<std::vector<at::Tensor>> saved = stash().take(stash_tag(a), a.tensors())) {
    out = (*saved)[0];
    leaves.assign(saved->begin() + 1, saved->end());
  } else {
    for (const at::Tensor* t : {&a.query, &a.key, &a.value}) {
      leaves.push_back((t->is_inference() ? t->clone() : t->detach()).requires_grad_(true));
    }
    out = run(leaves[0], leaves[1], leaves[2], a);
  }
  const std::vector<at::Tensor> got =
      torch::autograd::grad({out}, leaves, {grad_out}, /*retain_graph=*/false,
                            /*create_graph=*/false, /*allow_unused=*/true);
  for (size_t i = 0; i < leaves.size(); ++i) {
    result.push_back(got[i].defined() ? got[i].detach().contiguous()
                                      : at::zeros_like(leaves[i], at::MemoryFormat::Contiguous).detach());
  }
  s.emplace_back(c10::List<at::Tensor>(result));
}

size_t attention_stash_size() { return stash().size(); }

}  // namespace pt2rt
