// An inference plan's linear layers on oneDNN with the weight packed once
// (runtime/kernels/linear_prepack.h), on hand-built inference graphs `addmm(b, x, t(W))` and
// `mm(x, t(W))`: which instructions are rewritten (only when the plan asks for oneDNN, on a
// weight view only they read), results close to the BLAS's, a changed weight repacked, and
// the kernel's exact fallback.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include "catch_compat.h"

#include "assert_close.h"
#include "kernels/linear_prepack.h"
#include "plan/op_resolution.h"
#include "plan/plan.h"
#include "program_builder.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

struct Linear {
  int64_t rows = 32, in = 64, out = 48;
  bool bias = true;                 ///< addmm(b, x, t(W)), else mm(x, t(W))
  bool second_reader = false;       ///< t(W) also read by a second mm (y2 = mm(x, t(W)))
  std::optional<double> beta;       ///< addmm's beta (default 1)
};

std::unique_ptr<ExecutionPlan> linear_plan(const Linear& s, OneDnnChoice choice,
                                           bool inference_only = true) {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId x = g.input(plain(0), tensor_value("x", at::kFloat, {s.rows, s.in}));
  ValueId w = g.input(param("fc.weight"), tensor_value("fc.weight", at::kFloat, {s.out, s.in}));
  ValueId b = g.input(param("fc.bias"), tensor_value("fc.bias", at::kFloat, {s.out}));
  ValueId wt = g.node("aten::t", "", {tensor_arg(w)},
                      {tensor_value("t", at::kFloat, {s.in, s.out})})[0];
  std::vector<Argument> args = {tensor_arg(x), tensor_arg(wt)};
  if (s.bias) args.insert(args.begin(), tensor_arg(b));
  if (s.beta) args.push_back(kwarg("beta", c10::Scalar(*s.beta)));
  ValueId y = g.node(s.bias ? "aten::addmm" : "aten::mm", "", args,
                     {tensor_value("y", at::kFloat, {s.rows, s.out})})[0];
  g.output(plain_out(0), y);
  if (s.second_reader) {
    g.output(plain_out(1), g.node("aten::mm", "", {tensor_arg(x), tensor_arg(wt)},
                                  {tensor_value("y2", at::kFloat, {s.rows, s.out})})[0]);
  }
  auto prog = pb.program();
  PlanOptions options;
  options.cacheable_inputs = {false, true, true};
  options.inference_only = inference_only;
  options.onednn_choice = choice;
  return ExecutionPlan::build(prog, prog->graphs[0], resolve_operators(*prog), c10::kCPU,
                              options);
}

struct Tensors {
  at::Tensor x, w, b;
};

Tensors make_tensors(const Linear& s) {
  at::manual_seed(5);
  return {at::randn({s.rows, s.in}), at::randn({s.out, s.in}), at::randn({s.out})};
}

at::Tensor run(const ExecutionPlan& plan, const Tensors& t) {
  return plan.run({t.x, t.w, t.b})[0].toTensor();
}

at::Tensor blas(const Linear& s, const Tensors& t) {
  return s.bias ? at::addmm(t.b, t.x, t.w.t()) : at::mm(t.x, t.w.t());
}

bool packed(const ExecutionPlan& plan) {
  size_t packs = 0, linears = 0;
  for (const Instruction& ins : plan.prologue()) packs += ins.native == &prepack_linear_weight_op();
  for (const Instruction& ins : plan.instructions()) linears += ins.native == &linear_prepacked_op();
  CHECK(packs == linears);
  return packs == 1 && linears == 1;
}

}  // namespace

TEST_CASE("linear prepack: OneDnnChoice::OneDnn runs addmm / mm of a weight on oneDNN, close to the BLAS",
          "[plan][linear_prepack][onednn_benchmark]") {
  REQUIRE(at::hasMKLDNN());
  c10::NoGradGuard no_grad;
  for (bool bias : {true, false}) {
    Linear s;
    s.bias = bias;
    INFO("bias " << bias);
    auto plan = linear_plan(s, OneDnnChoice::OneDnn);
    REQUIRE(packed(*plan));
    Tensors t = make_tensors(s);
    const at::Tensor got = run(*plan, t);
    const Closeness close = assert_close(got, blas(s, t));
    INFO(close.message);
    CHECK(close.ok);
    CHECK(got.is_contiguous());
    CHECK(run(*plan, t).equal(got));  // the packed weight from the cache
    t.w.mul_(-0.5);                   // in place: packed again
    CHECK(assert_close(run(*plan, t), blas(s, t)).ok);
    Tensors other = make_tensors(s);
    other.w = at::randn_like(t.w);  // another weight tensor: packed again
    CHECK(assert_close(run(*plan, other), blas(s, other)).ok);
  }
}

TEST_CASE("linear prepack: Benchmark keeps whichever timed faster, close to the BLAS either way",
          "[plan][linear_prepack][onednn_benchmark]") {
  c10::NoGradGuard no_grad;
  const Linear s;
  auto plan = linear_plan(s, OneDnnChoice::Benchmark);
  const Tensors t = make_tensors(s);
  const at::Tensor got = run(*plan, t), want = blas(s, t);
  CHECK(assert_close(got, want).ok);
  if (!packed(*plan)) CHECK(got.equal(want));
}

TEST_CASE("linear prepack: what is not rewritten", "[plan][linear_prepack]") {
  c10::NoGradGuard no_grad;
  Linear s;
  auto unpacked = [](const ExecutionPlan& plan) {
    for (const Instruction& ins : plan.instructions()) CHECK(ins.native == nullptr);
    for (const Instruction& ins : plan.prologue()) CHECK(ins.native == nullptr);
  };
  SECTION("OneDnnChoice::Aten (ATen's kernel for addmm is the BLAS)") {
    unpacked(*linear_plan(s, OneDnnChoice::Aten));
  }
  SECTION("a plan that may train (no inference_only)") {
    unpacked(*linear_plan(s, OneDnnChoice::OneDnn, /*inference_only=*/false));
  }
  SECTION("a weight view two instructions read") {
    s.second_reader = true;
    unpacked(*linear_plan(s, OneDnnChoice::OneDnn));
  }
  SECTION("addmm with beta != 1") {
    s.beta = 0.5;
    auto plan = linear_plan(s, OneDnnChoice::OneDnn);
    unpacked(*plan);
    const Tensors t = make_tensors(s);
    CHECK(run(*plan, t).equal(at::addmm(t.b, t.x, t.w.t(), 0.5)));
  }
}

TEST_CASE("linear prepack: the kernel runs the BLAS on a weight that is not packed, exactly; any strided input on a packed one",
          "[plan][linear_prepack]") {
  c10::NoGradGuard no_grad;
  const Linear s;
  const Tensors t = make_tensors(s);
  for (bool bias : {true, false}) {
    torch::jit::Stack stack{t.x, t.w.t(), bias ? c10::IValue(t.b) : c10::IValue()};
    linear_prepacked_op().kernel(stack);
    REQUIRE(stack.size() == 1);
    CHECK(stack[0].toTensor().equal(bias ? at::addmm(t.b, t.x, t.w.t()) : at::mm(t.x, t.w.t())));
  }
  // a non-contiguous input (a transposed view) on the packed weight: oneDNN, close to the BLAS
  const at::Tensor x_t = at::randn({s.in, s.rows}).t();
  torch::jit::Stack stack{x_t, t.w.contiguous().to_mkldnn(), t.b};
  linear_prepacked_op().kernel(stack);
  CHECK(assert_close(stack[0].toTensor(), at::addmm(t.b, x_t, t.w.t())).ok);
}
