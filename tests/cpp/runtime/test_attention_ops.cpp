// pt2rt::scaled_dot_product_attention and its backward (runtime/kernels/attention_ops.h): the
// attention and its gradients (against the math formulation on every LibTorch; on a LibTorch
// with SDPA, bit for bit against ATen's own op and its autograd gradients, on the CPU and on
// CUDA where there is one), the declared result layout, the forward's graph kept for the
// backward and not used after an in-place write, shapes only on meta, bad arguments refused
// by name, and the run-cost scratch estimate.
#include "catch_compat.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <cmath>
#include <limits>

#include "core/libtorch_compat.h"
#include "core/run_cost.h"
#include "kernels/attention_ops.h"
#include "kernels/native_ops.h"
#include "native_op_call.h"

namespace pt2rt {
using test::run;

namespace {

struct Case {
  at::Tensor q, k, v;
  c10::IValue mask;  // None or a Tensor
  bool causal = false, gqa = false;
  c10::IValue scale;  // None or a double
};

// q [N=2, Hq=4, L=5, E=8], k [2, H, S=6, 8], v [2, H, 6, Ev=8]; H = 2 with gqa, else 4.
// q, k, v are views of projections laid out [N, L, H, E], as nn.MultiheadAttention's are.
Case make_case(at::Device device, bool gqa = false) {
  at::manual_seed(0);
  const int64_t h = gqa ? 2 : 4;
  const auto opts = at::device(device);
  Case c;
  c.q = at::randn({2, 5, 4, 8}, opts).transpose(1, 2);
  c.k = at::randn({2, 6, h, 8}, opts).transpose(1, 2);
  c.v = at::randn({2, 6, h, 8}, opts).transpose(1, 2);
  c.gqa = gqa;
  return c;
}

torch::jit::Stack forward_args(const Case& c) {
  return {c.q, c.k, c.v, c.mask, c.causal, c.scale, c.gqa};
}

/// softmax(q kᵀ / sqrt(E) + mask) v, written out (the documented definition).
at::Tensor reference(const Case& c, const at::Tensor& q, at::Tensor k, at::Tensor v) {
  if (c.gqa) {
    k = k.repeat_interleave(q.size(1) / k.size(1), 1);
    v = v.repeat_interleave(q.size(1) / v.size(1), 1);
  }
  const double scale = c.scale.isNone() ? 1 / std::sqrt(8.0) : c.scale.toDouble();
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * scale;
  const double inf = std::numeric_limits<double>::infinity();
  if (c.causal) s = s.masked_fill(at::ones({5, 6}, q.options().dtype(at::kBool)).tril().logical_not(), -inf);
  if (c.mask.isTensor()) s = s.masked_fill(c.mask.toTensor().logical_not(), -inf);
  return at::matmul(at::softmax(s, -1), v);
}

std::vector<at::Tensor> leaves_of(const Case& c) {
  std::vector<at::Tensor> v{c.q, c.k, c.v};
  for (at::Tensor& t : v) t = t.detach().clone().requires_grad_(true);
  return v;
}

std::vector<at::Device> devices() {
  std::vector<at::Device> d{at::kCPU};
  if (at::hasCUDA()) d.emplace_back(at::kCUDA);
  return d;
}

}  // namespace

TEST_CASE("attention_ops: the forward and backward are scaled dot-product attention and its "
          "gradients", "[attention_ops][cuda]") {
  for (const at::Device device : devices()) {
    for (int variant = 0; variant < 4; ++variant) {
      INFO(device << ", variant " << variant << " (0 plain, 1 causal, 2 bool mask + scale, "
                  "3 grouped-query)");
      Case c = make_case(device, variant == 3);
      c.causal = variant == 1;
      if (variant == 2) {
        c.mask = at::rand({5, 6}, at::device(device)) > 0.3;
        c.mask.toTensor().select(1, 0).fill_(true);  // every row attends somewhere
        c.scale = 1 / std::sqrt(8.0);
      }
      const size_t stashed = attention_stash_size();
      const torch::jit::Stack out = run("pt2rt::scaled_dot_product_attention", forward_args(c));
      REQUIRE(out.size() == 1);
      CHECK(attention_stash_size() == stashed + 1);  // a forward outside InferenceMode keeps its graph
      const at::Tensor o = out[0].toTensor();
      CHECK(o.sizes() == at::IntArrayRef({2, 4, 5, 8}));
      CHECK(o.strides() == c.q.strides());  // laid out like query

      std::vector<at::Tensor> leaves = leaves_of(c);
      const at::Tensor want = reference(c, leaves[0], leaves[1], leaves[2]);
      CHECK(at::allclose(o, want, 1e-4, 1e-5));
      const at::Tensor g = at::randn({2, 4, 5, 8}, at::device(device));
      const auto ref = torch::autograd::grad({want}, leaves, {g});
      torch::jit::Stack args{g};
      for (const c10::IValue& v : forward_args(c)) args.push_back(v);
      std::vector<at::Tensor> first;
      for (const char* pass : {"through the forward's graph", "recomputed"}) {
        INFO(pass);
        const std::vector<at::Tensor> got =
            run("pt2rt::scaled_dot_product_attention_backward", args)[0].toTensorVector();
        CHECK(attention_stash_size() == stashed);
        REQUIRE(got.size() == 3);
        for (size_t i = 0; i < 3; ++i) {
          INFO("gradient " << i);
          CHECK(got[i].sizes() == leaves[i].sizes());
          CHECK(got[i].is_contiguous());
          CHECK(at::allclose(got[i], ref[i], 1e-4, 1e-5));
          if (!first.empty()) CHECK(at::equal(got[i], first[i]));
        }
        first = got;
      }
      // On a LibTorch with SDPA, exactly ATen's op (the fused kernel eager picks) and its
      // autograd gradients.
      const std::optional<at::Scalar> none;
      std::vector<at::Tensor> eager = leaves_of(c);
      std::optional<at::Tensor> mask;
      if (c.mask.isTensor()) mask = c.mask.toTensor();
      if (std::optional<at::Tensor> e = aten_scaled_dot_product_attention(
              eager[0], eager[1], eager[2], mask, c.causal,
              c.scale.isNone() ? std::nullopt : std::optional<double>(c.scale.toDouble()),
              c.gqa)) {
        CHECK(at::equal(o, *e));
        const auto eg = torch::autograd::grad({*e}, eager, {g});
        for (size_t i = 0; i < 3; ++i) CHECK(at::equal(first[i], eg[i]));
      }
    }
  }
}

TEST_CASE("attention_ops: a write into an argument after the forward makes the backward "
          "recompute; InferenceMode keeps nothing", "[attention_ops]") {
  Case c = make_case(at::kCPU);
  const size_t stashed = attention_stash_size();
  run("pt2rt::scaled_dot_product_attention", forward_args(c));
  CHECK(attention_stash_size() == stashed + 1);
  const at::Tensor g = at::randn({2, 4, 5, 8});
  torch::jit::Stack args{g};
  for (const c10::IValue& v : forward_args(c)) args.push_back(v);
  c.k.mul_(2);  // a view: the write bumps the shared version counter
  std::vector<at::Tensor> leaves = leaves_of(c);
  const auto ref = torch::autograd::grad({reference(c, leaves[0], leaves[1], leaves[2])}, leaves, {g});
  const std::vector<at::Tensor> got =
      run("pt2rt::scaled_dot_product_attention_backward", args)[0].toTensorVector();
  CHECK(attention_stash_size() == stashed + 1);  // not taken: its arguments changed
  CHECK(at::allclose(got[0], ref[0], 1e-4, 1e-5));  // the doubled keys' gradients
  {
    c10::InferenceMode inference;
    Case ci = make_case(at::kCPU);
    const size_t before = attention_stash_size();
    run("pt2rt::scaled_dot_product_attention", forward_args(ci));
    CHECK(attention_stash_size() == before);
  }
}

TEST_CASE("attention_ops: meta tensors give the declared shapes and layout", "[attention_ops]") {
  Case c = make_case(at::kMeta);
  const at::Tensor o = run("pt2rt::scaled_dot_product_attention", forward_args(c))[0].toTensor();
  CHECK(o.is_meta());
  CHECK(o.sizes() == at::IntArrayRef({2, 4, 5, 8}));
  CHECK(o.strides() == at::IntArrayRef({160, 8, 32, 1}));  // query's: [N, L, H, E] transposed
  torch::jit::Stack args{at::empty({2, 4, 5, 8}, at::device(at::kMeta))};
  for (const c10::IValue& v : forward_args(c)) args.push_back(v);
  const std::vector<at::Tensor> grads =
      run("pt2rt::scaled_dot_product_attention_backward", args)[0].toTensorVector();
  REQUIRE(grads.size() == 3);
  CHECK(grads[2].sizes() == at::IntArrayRef({2, 4, 6, 8}));
  // value's head dim differs from query's: a contiguous result
  Case c3 = make_case(at::kMeta);
  c3.v = at::empty({2, 4, 6, 3}, at::device(at::kMeta));
  const at::Tensor o3 = run("pt2rt::scaled_dot_product_attention", forward_args(c3))[0].toTensor();
  CHECK(o3.sizes() == at::IntArrayRef({2, 4, 5, 3}));
  CHECK(o3.is_contiguous());
}

TEST_CASE("attention_ops: arguments outside the layout are refused by name", "[attention_ops]") {
  auto fails = [](const Case& c, const std::string& what) {
    test::check_refused("pt2rt::scaled_dot_product_attention", forward_args(c), what);
  };
  Case c = make_case(at::kCPU);
  c.k = at::randn({2, 4, 6, 7});
  fails(c, "key's last dim 7 differs from query's 8");
  c = make_case(at::kCPU);
  c.v = at::randn({2, 4, 7, 8});
  fails(c, "value has 7 positions, key 6");
  c = make_case(at::kCPU);
  c.k = at::randn({3, 4, 6, 8});
  fails(c, "dim 0 of key and value must equal query's (2)");
  c = make_case(at::kCPU);
  c.v = c.v.to(at::kDouble);
  fails(c, "key and value must be Float tensors");
  c = make_case(at::kCPU, /*gqa=*/true);
  c.k = at::randn({2, 3, 6, 8});
  c.v = at::randn({2, 3, 6, 8});
  fails(c, "with enable_gqa, key and value need the same number of heads");
  c = make_case(at::kCPU);
  c.mask = at::ones({5, 6}, at::kInt);
  fails(c, "attn_mask must be a bool or Float tensor");
  c = make_case(at::kCPU);
  c.scale = std::numeric_limits<double>::infinity();
  fails(c, "scale must be finite");
  c = make_case(at::kCPU);
  c.q = at::randn({5, 8}).expand({2, 2, 2, 2, 2, 2, 2, 2, 5, 8});
  fails(c, "2 to 8");
}

TEST_CASE("attention_ops: the run cost counts the scores a backward may hold", "[attention_ops]") {
  const NativeOp* op = find_native_op("pt2rt::scaled_dot_product_attention_backward", "");
  REQUIRE(op != nullptr);
  const Case c = make_case(at::kMeta);
  torch::jit::Stack args{at::empty({2, 4, 5, 8}, at::device(at::kMeta))};
  for (const c10::IValue& v : forward_args(c)) args.push_back(v);
  const NodeCost cost = node_cost(op->schema, args, {});
  CHECK(cost.scratch_bytes == uint64_t{2 * 4 * 5} * 6 * 2 * 4);  // scores + probabilities, float
  CHECK(cost.work >= uint64_t{2 * 4 * 5 * 8} * 6);
}

}  // namespace pt2rt
