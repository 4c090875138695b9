// A training-mode BatchNorm's running-statistics arithmetic, as the exporter writes it, run
// by the batch-norm kernel itself (runtime/plan/fuse_batch_norm_stats.h), on hand-built forward graphs:
// which groups are fused, that the fused results are eager's (the kernel updating the
// model's buffers in place, or clones of statistics something else still sees), and that
// whatever does not match exactly — at plan build or at run time — computes the graph as
// written.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include "catch_compat.h"

#include "kernels/batch_norm_stats.h"
#include "plan/op_resolution.h"
#include "plan/plan.h"
#include "program_builder.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

constexpr double kMomentum = 0.1, kEps = 1e-5;

/// What to change in the exporter's pattern (each breaks the match).
struct Variant {
  double factor_n = 0;          ///< n of the n / (n - 1) factor; 0: the input's own
  double var_momentum = kMomentum;
  bool expose_biased_var = false;  ///< the sub's result is also a graph output
  bool expose_running_mean = false;  ///< the running_mean input is also a graph output
  /// x: float32[s0, 3, 5, 5], and the unbiased variance is the exporter's variance pass
  /// var.correction(x, [0, 2, 3], correction=1) (a matching form, not a break).
  bool symbolic_batch = false;
};

/// The forward graph of one BatchNorm2d in training mode on x: float32[4, 3, 5, 5] (n = 100
/// per channel; the batch symbolic with hint 4 when v.symbolic_batch), outputs (out,
/// save_mean, save_invstd, new running_mean, new running_var[, biased var]).
std::unique_ptr<ExecutionPlan> batch_norm_plan(const Variant& v, c10::Device device = c10::kCPU) {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Forward);
  Value xv = tensor_value("x", at::kFloat, {4, 3, 5, 5});
  if (v.symbolic_batch) {
    SymExpr s0;
    s0.op = SymOp::Symbol;
    s0.symbol = 0;
    xv.meta->sizes[0].expr = s0;
  }
  Value out = xv;
  out.name = "out";
  ValueId x = g.input(plain(0), xv);
  ValueId w = g.input(param("bn.weight"), tensor_value("bn.weight", at::kFloat, {3}));
  ValueId b = g.input(param("bn.bias"), tensor_value("bn.bias", at::kFloat, {3}));
  ValueId rm = g.input(buffer("bn.running_mean"), tensor_value("bn.running_mean", at::kFloat, {3}));
  ValueId rv = g.input(buffer("bn.running_var"), tensor_value("bn.running_var", at::kFloat, {3}));
  auto stat = [](const char* name) { return tensor_value(name, at::kFloat, {3}); };
  auto bn = g.node("aten::native_batch_norm", "",
                   {tensor_arg(x), tensor_arg(w), tensor_arg(b), arg(NoneArg{}), arg(NoneArg{}),
                    arg(true), arg(kMomentum), arg(kEps)},
                   {out, stat("mean"), stat("invstd")});
  ValueId new_mean = g.node("aten::lerp", "Scalar", {tensor_arg(rm), tensor_arg(bn[1]), arg(kMomentum)},
                            {stat("new_mean")})[0];
  ValueId s = 0, u = 0;
  if (v.symbolic_batch) {
    u = g.node("aten::var", "correction",
               {tensor_arg(x), arg(IntListArg{{0, 2, 3}}), kwarg("correction", int64_t{1}),
                kwarg("keepdim", false)},
               {stat("u")})[0];
  } else {
    ValueId p = g.node("aten::pow", "Tensor_Scalar", {tensor_arg(bn[2]), arg(int64_t{-2})}, {stat("p")})[0];
    s = g.node("aten::sub", "Tensor", {tensor_arg(p), arg(kEps)}, {stat("s")})[0];
    const double n = v.factor_n ? v.factor_n : 100;
    u = g.node("aten::mul", "Tensor", {tensor_arg(s), arg(n / (n - 1))}, {stat("u")})[0];
  }
  ValueId new_var = g.node("aten::lerp", "Scalar", {tensor_arg(rv), tensor_arg(u), arg(v.var_momentum)},
                           {stat("new_var")})[0];
  g.output(plain_out(0), bn[0]);
  g.output(saved_out(0), bn[1]);
  g.output(saved_out(1), bn[2]);
  g.output(mutation_of(buffer("bn.running_mean")), new_mean);
  g.output(mutation_of(buffer("bn.running_var")), new_var);
  if (v.expose_biased_var) g.output(plain_out(1), s);
  if (v.expose_running_mean) g.output(plain_out(1), rm);
  auto prog = pb.program();
  return ExecutionPlan::build(prog, prog->graphs[0], resolve_operators(*prog), device);
}

struct Inputs {
  at::Tensor x, w, b, rm, rv;
};

Inputs make_inputs(int64_t batch = 4) {
  at::manual_seed(7);
  return {at::randn({batch, 3, 5, 5}) * 3 + 1, at::rand({3}) + 0.5, at::randn({3}),
          at::randn({3}), at::rand({3}) + 0.5};
}

std::vector<at::Tensor> run(const ExecutionPlan& plan, const Inputs& in) {
  std::vector<c10::IValue> args{in.x, in.w, in.b, in.rm, in.rv};
  std::vector<at::Tensor> out;
  for (const c10::IValue& v : plan.run(std::move(args))) out.push_back(v.toTensor());
  return out;
}

/// The graph as written, op by op (factor n / (n - 1) of the declared n = 100 unless given).
std::vector<at::Tensor> as_written(const Inputs& in, double n = 100, double var_momentum = kMomentum) {
  auto [out, mean, invstd] =
      at::native_batch_norm(in.x, in.w, in.b, c10::nullopt, c10::nullopt, true, kMomentum, kEps);
  at::Tensor u = at::mul(at::sub(at::pow(invstd, -2), kEps), n / (n - 1));
  return {out, mean, invstd, at::lerp(in.rm, mean, kMomentum), at::lerp(in.rv, u, var_momentum)};
}

/// Eager PyTorch: the kernel updates the running statistics it is given.
std::vector<at::Tensor> eager(const Inputs& in) {
  at::Tensor rm = in.rm.clone(), rv = in.rv.clone();
  auto [out, mean, invstd] = at::native_batch_norm(in.x, in.w, in.b, rm, rv, true, kMomentum, kEps);
  return {out, mean, invstd, rm, rv};
}

void check_equal(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  REQUIRE(got.size() >= want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    INFO("result " << k);
    CHECK(got[k].scalar_type() == want[k].scalar_type());
    CHECK(got[k].sizes() == want[k].sizes());
    CHECK(got[k].equal(want[k]));
  }
}

}  // namespace

TEST_CASE("batch-norm stats: the exporter's running-stat arithmetic runs in the kernel, with eager's results",
          "[plan][batch_norm_stats]") {
  c10::NoGradGuard no_grad;  // as the training forward runs its plan
  auto plan = batch_norm_plan({});
  REQUIRE(plan->instructions().size() == 1);
  CHECK(plan->instructions()[0].native == &batch_norm_with_stats_op());
  CHECK(plan->instructions()[0].node == 0);  // errors and profiles name the native_batch_norm

  Inputs in = make_inputs();
  const Inputs before{in.x, in.w, in.b, in.rm.clone(), in.rv.clone()};
  const std::vector<at::Tensor> want = eager(before), written = as_written(before);
  const int64_t rm_version = in.rm._version(), rv_version = in.rv._version();
  const std::vector<at::Tensor> got = run(*plan, in);
  check_equal(got, want);
  // The statistics are the model's buffers (Buffer inputs whose InputMutation outputs are
  // the new values): updated in place, as eager's kernel does, with their versions bumped.
  CHECK(got[3].is_same(in.rm));
  CHECK(got[4].is_same(in.rv));
  CHECK(in.rm._version() > rm_version);
  CHECK(in.rv._version() > rv_version);
  // out / save_mean / save_invstd are the unfused node's bits; the new statistics differ
  // from the graph's float32 arithmetic on save_invstd by rounding only.
  for (size_t k = 0; k < 3; ++k) CHECK(got[k].equal(written[k]));
  CHECK(at::allclose(got[3], written[3], 1e-6, 0));
  CHECK(at::allclose(got[4], written[4], 1e-6, 0));
  CHECK(!got[4].equal(written[4]));  // the data above makes the two roundings differ

  SECTION("statistics something else still sees are updated on clones") {
    Variant v;
    v.expose_running_mean = true;  // the graph returns the old running_mean too
    auto exposed = batch_norm_plan(v);
    REQUIRE(exposed->instructions().size() == 1);
    Inputs again{in.x, in.w, in.b, before.rm.clone(), before.rv.clone()};
    const std::vector<at::Tensor> out = run(*exposed, again);
    check_equal(out, want);
    CHECK(again.rm.equal(before.rm));
    CHECK(again.rv.equal(before.rv));
    CHECK(out[5].equal(before.rm));
  }

  SECTION("statistics that share a storage at run time are updated on clones") {
    at::Tensor both = at::stack({before.rm, before.rv});
    Inputs tied{in.x, in.w, in.b, both[0], both[1]};  // two views of one storage
    const std::vector<at::Tensor> out = run(*plan, tied);
    check_equal(out, want);
    CHECK(both[0].equal(before.rm));
    CHECK(both[1].equal(before.rv));
  }

  // The meta check's plan keeps the graph node by node.
  CHECK(batch_norm_plan({}, c10::Device(c10::kMeta))->instructions().size() == 6);
}

TEST_CASE("batch-norm stats: a group that does not match exactly is left as written",
          "[plan][batch_norm_stats]") {
  c10::NoGradGuard no_grad;
  const Inputs in = make_inputs();
  Variant v;
  SECTION("a factor that is not n / (n - 1) of the input's per-channel count") {
    v.factor_n = 50;
    auto plan = batch_norm_plan(v);
    CHECK(plan->instructions().size() == 6);
    check_equal(run(*plan, in), as_written(in, 50));
  }
  SECTION("the running variance updated with another momentum") {
    v.var_momentum = 0.2;
    auto plan = batch_norm_plan(v);
    CHECK(plan->instructions().size() == 6);
    check_equal(run(*plan, in), as_written(in, 100, 0.2));
  }
  SECTION("an intermediate the graph also returns") {
    v.expose_biased_var = true;
    auto plan = batch_norm_plan(v);
    CHECK(plan->instructions().size() == 6);
    const std::vector<at::Tensor> got = run(*plan, in);
    check_equal(got, as_written(in));
    REQUIRE(got.size() == 6);
    CHECK(got[5].equal(at::sub(at::pow(got[2], -2), kEps)));
  }
}

TEST_CASE("batch-norm stats: a call whose tensors do not fit the fusion computes the graph as written",
          "[plan][batch_norm_stats]") {
  c10::NoGradGuard no_grad;
  auto plan = batch_norm_plan({});
  REQUIRE(plan->instructions().size() == 1);
  SECTION("another per-channel count than the declared one (the factor no longer fits)") {
    const Inputs in = make_inputs(2);
    check_equal(run(*plan, in), as_written(in, 100));
  }
  SECTION("running statistics of another dtype than the input") {
    Inputs in = make_inputs();
    in.rm = in.rm.to(at::kDouble);
    in.rv = in.rv.to(at::kDouble);
    // As written, lerp mixes float64 statistics with float32 batch statistics; whatever
    // LibTorch does with that (a result or an error), the fused plan does the same.
    std::vector<at::Tensor> want;
    std::string want_error;
    try {
      want = as_written(in);
    } catch (const c10::Error& e) {
      want_error = e.what_without_backtrace();
    }
    if (want_error.empty()) {
      check_equal(run(*plan, in), want);
    } else {
      CHECK_THROWS(run(*plan, in));
    }
  }
}

TEST_CASE("batch-norm stats: with a symbolic batch the variance pass over the input is fused too",
          "[plan][batch_norm_stats]") {
  c10::NoGradGuard no_grad;
  Variant v;
  v.symbolic_batch = true;
  auto plan = batch_norm_plan(v);
  REQUIRE(plan->instructions().size() == 1);

  for (int64_t batch : {4, 7}) {  // the hint, and another batch
    INFO("batch " << batch);
    Inputs in = make_inputs(batch);
    const Inputs before{in.x, in.w, in.b, in.rm.clone(), in.rv.clone()};
    const std::vector<at::Tensor> got = run(*plan, in);
    check_equal(got, eager(before));
    // As written: the variance pass, within float32 rounding of the kernel's statistics.
    const at::Tensor written = at::lerp(before.rv, at::var(in.x, {0, 2, 3}, true, false), kMomentum);
    CHECK(at::allclose(got[4], written, 1e-6, 1e-7));
  }
  SECTION("one element per channel: the graph as written (the unbiased variance is undefined)") {
    Inputs in = make_inputs(1);
    in.x = in.x.narrow(2, 0, 1).narrow(3, 0, 1).contiguous();  // [1, 3, 1, 1]
    const at::Tensor rv_before = in.rv.clone();
    const std::vector<at::Tensor> got = run(*plan, in);
    const at::Tensor want = at::lerp(rv_before, at::var(in.x, {0, 2, 3}, true, false), kMomentum);
    CHECK(got[4].isnan().equal(want.isnan()));
    CHECK(got[4].isnan().all().item<bool>());
  }
}
