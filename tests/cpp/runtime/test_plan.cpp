// Execution plans on hand-built programs: op resolution, argument conversion against the
// runtime schema, native ops, liveness, ExecutionError.
#include <ATen/ATen.h>
#include "catch_compat.h"

#include "plan/op_resolution.h"
#include "plan/plan.h"
#include "program_builder.h"
#include "pt2rt/errors.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

namespace {

std::unique_ptr<ExecutionPlan> build(const std::shared_ptr<Program>& p, size_t graph = 0,
                                     c10::Device device = c10::kCPU) {
  auto ops = resolve_operators(*p);
  return ExecutionPlan::build(p, p->graphs[graph], ops, device);
}

at::Tensor run1(const ExecutionPlan& plan, std::vector<c10::IValue> in, size_t out = 0) {
  return plan.run(std::move(in)).at(out).toTensor();
}

}  // namespace

TEST_CASE("a hand-built graph runs; omitted trailing arguments take schema defaults", "[plan]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {3}));
  ValueId b = g.input(plain(1), tensor_value("b", at::kFloat, {3}));
  // aten::add.Tensor(self, other, *, alpha=1): alpha omitted -> default 1.
  ValueId s = g.node("aten::add", "Tensor", {tensor_arg(a), tensor_arg(b)},
                     {tensor_value("s", at::kFloat, {3})})[0];
  // alpha given by name (kwarg_only): a + 2 * s
  ValueId t = g.node("aten::add", "Tensor",
                     {tensor_arg(a), tensor_arg(s), kwarg("alpha", c10::Scalar(int64_t(2)))},
                     {tensor_value("t", at::kFloat, {3})})[0];
  g.output(plain_out(0), t);
  auto plan = build(pb.program());
  at::Tensor x = at::tensor({1.f, 2.f, 3.f}), y = at::tensor({10.f, 20.f, 30.f});
  at::Tensor r = run1(*plan, {x, y});
  CHECK(r.equal(x + 2 * (x + y)));
}

TEST_CASE("every unknown op is reported at once with both torch versions", "[plan][errors]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {3}));
  ValueId b = g.node("aten::definitely_not_an_op", "", {tensor_arg(a)},
                     {tensor_value("b", at::kFloat, {3})})[0];
  ValueId c = g.node("aten::relu", "no_such_overload", {tensor_arg(b)},
                     {tensor_value("c", at::kFloat, {3})})[0];
  ValueId d = g.node("aten::relu", "", {tensor_arg(c)}, {tensor_value("d", at::kFloat, {3})})[0];
  g.output(plain_out(0), d);
  try {
    resolve_operators(*pb.program());
    FAIL("expected OpResolutionError");
  } catch (const OpResolutionError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Contains("2 operators are not available"));
    CHECK_THAT(m, Contains("aten::definitely_not_an_op"));
    CHECK_THAT(m, Contains("aten::relu.no_such_overload"));
    CHECK_THAT(m, Contains("exported with torch 9.9.0"));
    CHECK_THAT(m, Contains("running torch " + running_torch_version()));
    CHECK_THAT(m, !Contains("aten::relu\n"));
  }
}

TEST_CASE("argument kinds that do not fit the runtime schema are FormatErrors", "[plan][errors]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {3}));

  SECTION("an int[] where the schema wants a Tensor") {
    ValueId b = g.node("aten::mul", "Tensor", {tensor_arg(a), arg(IntListArg{{3, 4}})},
                       {tensor_value("b", at::kFloat, {3})}, "mul_bad")[0];
    g.output(plain_out(0), b);
    REQUIRE_THROWS_MATCHES(build(pb.program()), FormatError,
                           Catch::Matchers::Predicate<FormatError>([](const FormatError& e) {
                             std::string m = e.what();
                             return m.find("'mul_bad'") != std::string::npos &&
                                    m.find("aten::mul.Tensor") != std::string::npos &&
                                    m.find("argument 'other'") != std::string::npos &&
                                    m.find("gives a int[]") != std::string::npos;
                           }));
  }
  SECTION("a Tensor reference to a SymInt value") {
    ValueId n = g.node("sym::size", "", {tensor_arg(a), arg(int64_t(0))},
                       {value_of_kind("n", ValueKind::SymInt)})[0];
    ValueId b = g.node("aten::mul", "Tensor", {tensor_arg(a), tensor_arg(n)},
                       {tensor_value("b", at::kFloat, {3})})[0];
    g.output(plain_out(0), b);
    REQUIRE_THROWS_WITH(build(pb.program()), Contains("is a SymInt, expected a Tensor"));
  }
  SECTION("a required argument missing") {
    ValueId b = g.node("aten::mul", "Tensor", {tensor_arg(a)}, {tensor_value("b", at::kFloat, {3})})[0];
    g.output(plain_out(0), b);
    REQUIRE_THROWS_AS(build(pb.program()), FormatError);
    REQUIRE_THROWS_WITH(build(pb.program()), Contains("argument 'other' is missing"));
  }
  SECTION("a keyword argument the runtime schema does not have") {
    ValueId b = g.node("aten::relu", "", {tensor_arg(a), kwarg("turbo", true)},
                       {tensor_value("b", at::kFloat, {3})})[0];
    g.output(plain_out(0), b);
    REQUIRE_THROWS_WITH(build(pb.program()), Contains("argument 'turbo' is not in the running"));
  }
  SECTION("output count differing from the schema's returns") {
    auto outs = g.node("aten::relu", "", {tensor_arg(a)},
                       {tensor_value("b", at::kFloat, {3}), tensor_value("c", at::kFloat, {3})});
    g.output(plain_out(0), outs[0]);
    REQUIRE_THROWS_WITH(build(pb.program()), Contains("has 2 outputs but"));
  }
  SECTION("a value id out of range") {
    ValueId b = g.node("aten::relu", "", {tensor_arg(99)}, {tensor_value("b", at::kFloat, {3})})[0];
    g.output(plain_out(0), b);
    REQUIRE_THROWS_WITH(build(pb.program()), Contains("value id 99 is out of range"));
  }
}

TEST_CASE("a None for a plain Tensor argument is an undefined tensor, as LibTorch converts it",
          "[plan][device]") {
  // FX records `None` where a backward op's plain `Tensor` input is absent (CUDA efficient
  // attention's attn_bias); LibTorch's own Python -> IValue conversion passes an undefined
  // tensor there. The plan builds; a kernel that needs the tensor fails with ExecutionError.
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {3}));
  ValueId b = g.node("aten::add", "Tensor", {tensor_arg(a), arg(NoneArg{})},
                     {tensor_value("b", at::kFloat, {3})}, "add_none")[0];
  g.output(plain_out(0), b);
  std::unique_ptr<ExecutionPlan> plan;
  REQUIRE_NOTHROW(plan = build(pb.program()));  // a FormatError ("gives a None") before
  REQUIRE_THROWS_AS(plan->run({at::ones({3})}), ExecutionError);
  REQUIRE_THROWS_WITH(plan->run({at::ones({3})}), Contains("'add_none'"));
}

TEST_CASE("a Python number for a Tensor argument becomes a wrapped-number tensor", "[plan]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kLong, {2}));
  // aten::add.Tensor(a, 0.5) as FX records `a + 0.5`: promotes int64 -> float32 like eager.
  ValueId b = g.node("aten::add", "Tensor", {tensor_arg(a), arg(0.5)},
                     {tensor_value("b", at::kFloat, {2})})[0];
  g.output(plain_out(0), b);
  auto plan = build(pb.program());
  at::Tensor r = run1(*plan, {at::tensor({int64_t(1), int64_t(2)})});
  CHECK(r.scalar_type() == at::kFloat);
  CHECK(r.equal(at::tensor({1.5f, 2.5f})));
}

TEST_CASE("Tensor[] results are taken apart by prim::getitem", "[plan][native]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {6}));
  ValueId parts = g.node("aten::split", "Tensor", {tensor_arg(a), arg(int64_t(2))},
                         {value_of_kind("parts", ValueKind::TensorList)})[0];
  ValueId p0 = g.node("prim::getitem", "", {arg(TensorListRef{parts}), arg(int64_t(0))},
                      {tensor_value("p0", at::kFloat, {2})})[0];
  ValueId p2 = g.node("prim::getitem", "", {arg(TensorListRef{parts}), arg(int64_t(-1))},
                      {tensor_value("p2", at::kFloat, {2})})[0];
  ValueId cat = g.node("aten::cat", "", {arg(TensorListArg{{p2, p0}})},
                       {tensor_value("cat", at::kFloat, {4})})[0];
  g.output(plain_out(0), cat);
  auto plan = build(pb.program());
  at::Tensor x = at::arange(6, at::kFloat);
  CHECK(run1(*plan, {x}).equal(at::tensor({4.f, 5.f, 0.f, 1.f})));
}

TEST_CASE("SymInt values flow through sym:: ops into SymInt[] arguments", "[plan][native]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {2, 3}));
  ValueId n0 = g.node("sym::size", "", {tensor_arg(a), arg(int64_t(0))},
                      {value_of_kind("n0", ValueKind::SymInt)})[0];
  ValueId n1 = g.node("sym::size", "", {tensor_arg(a), arg(int64_t(1))},
                      {value_of_kind("n1", ValueKind::SymInt)})[0];
  ValueId n = g.node("sym::mul", "", {arg(SymIntRef{n0}), arg(SymIntRef{n1})},
                     {value_of_kind("n", ValueKind::SymInt)})[0];
  ValueId m = g.node("sym::floordiv", "", {arg(SymIntRef{n}), arg(int64_t(-4))},
                     {value_of_kind("m", ValueKind::SymInt)})[0];
  ValueId v = g.node("aten::view", "", {tensor_arg(a), arg(SymIntListArg{{n, 1}, {true, false}})},
                     {tensor_value("v", at::kFloat, {6, 1})})[0];
  g.output(plain_out(0), v);
  g.output(plain_out(1), m);
  auto plan = build(pb.program());
  auto out = plan->run({at::ones({2, 3})});
  CHECK(out[0].toTensor().sizes() == c10::IntArrayRef({6, 1}));
  CHECK(out[1].toInt() == -2);  // Python: 6 // -4 == -2
}

TEST_CASE("values are released after their last use, inputs too; outputs are moved out", "[plan]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {3}));
  ValueId b = g.node("aten::abs", "", {tensor_arg(a)}, {tensor_value("b", at::kFloat, {3})})[0];
  ValueId c = g.node("aten::neg", "", {tensor_arg(b)}, {tensor_value("c", at::kFloat, {3})})[0];
  auto mm = g.node("aten::max", "dim", {tensor_arg(c), arg(int64_t(0))},
                   {tensor_value("mx", at::kFloat, {}), tensor_value("idx", at::kLong, {})});
  ValueId d = g.node("aten::mul", "Tensor", {tensor_arg(c), tensor_arg(mm[0])},
                     {tensor_value("d", at::kFloat, {3})})[0];
  g.output(plain_out(0), d);
  auto plan = build(pb.program());
  const auto& ins = plan->instructions();
  REQUIRE(ins.size() == 4);
  CHECK(ins[0].release == std::vector<ValueId>{a});              // the frame's input dies at abs
  CHECK(ins[1].release == std::vector<ValueId>{b});              // b dies at neg
  CHECK(ins[2].release == std::vector<ValueId>{mm[1]});          // unused idx dies at once
  CHECK(ins[3].release == std::vector<ValueId>{c, mm[0]});       // d (output) is moved out
  REQUIRE(plan->segments().size() == 1);
  REQUIRE(plan->segments()[0].deliveries.size() == 1);
  CHECK(plan->segments()[0].deliveries[0].slot == d);
  CHECK(plan->segments()[0].deliveries[0].move);
  CHECK(run1(*plan, {at::tensor({1.f, -2.f, 3.f})}).equal(at::tensor({1.f, 2.f, 3.f})));  // -|a| * max(-|a|)
}

TEST_CASE("device arguments are retargeted to the model's device", "[plan][device]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {2}));
  ValueId z = g.node("aten::zeros", "",
                     {arg(IntListArg{{2}}), kwarg("dtype", c10::ScalarType::Float),
                      kwarg("device", c10::Device("cuda:1"))},
                     {tensor_value("z", at::kFloat, {2})})[0];
  ValueId r = g.node("aten::add", "Tensor", {tensor_arg(a), tensor_arg(z)},
                     {tensor_value("r", at::kFloat, {2})})[0];
  g.output(plain_out(0), r);
  auto plan = build(pb.program());
  const auto& zeros_args = plan->instructions()[0].args;
  // aten::zeros(size, *, dtype, layout, device, pin_memory): device is argument 3.
  REQUIRE(zeros_args.size() == 5);
  CHECK(zeros_args[3].constant.toDevice() == c10::Device(c10::kCPU));
  CHECK(run1(*plan, {at::ones({2})}).equal(at::ones({2})));
  // Compiled for another device, the recorded device follows it (no kernel runs here).
  auto meta_plan = build(pb.program(), 0, c10::Device("cuda:0"));
  CHECK(meta_plan->instructions()[0].args[3].constant.toDevice() == c10::Device("cuda:0"));
}

TEST_CASE("a failing kernel raises ExecutionError with node, arguments and export trace",
          "[plan][errors]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {4, 4}));
  ValueId b = g.input(plain(1), tensor_value("b", at::kFloat, {3, 5}));
  ValueId c = g.node("aten::mm", "", {tensor_arg(a), tensor_arg(b)},
                     {tensor_value("c", at::kFloat, {4, 5})}, "mm_7",
                     "File \"model.py\", line 12, in forward\n    return x @ self.w")[0];
  g.output(plain_out(0), c);
  auto plan = build(pb.program());
  try {
    plan->run({at::ones({4, 4}), at::ones({3, 5}, at::kFloat)});
    FAIL("expected ExecutionError");
  } catch (const ExecutionError& e) {
    std::string m = e.what();
    CHECK_THAT(m, Contains("node 0 'mm_7' (aten::mm) failed"));
    CHECK_THAT(m, Contains("self: float32[4, 4] on cpu"));
    CHECK_THAT(m, Contains("mat2: float32[3, 5] on cpu"));
    CHECK_THAT(m, Contains("mat1 and mat2 shapes cannot be multiplied"));
    CHECK_THAT(m, Contains("line 12, in forward"));
  }
}

TEST_CASE("specialised plans: unneeded outputs and their nodes go, early delivery in segments",
          "[plan][specialize]") {
  // o0 = relu(a); o1 = neg(abs(a)); o2 = a (an input delivered as is)
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId a = g.input(plain(0), tensor_value("a", at::kFloat, {3}));
  ValueId r = g.node("aten::relu", "", {tensor_arg(a)}, {tensor_value("r", at::kFloat, {3})})[0];
  ValueId b = g.node("aten::abs", "", {tensor_arg(a)}, {tensor_value("b", at::kFloat, {3})})[0];
  ValueId n = g.node("aten::neg", "", {tensor_arg(b)}, {tensor_value("n", at::kFloat, {3})})[0];
  g.output(plain_out(0), r);
  g.output(plain_out(1), n);
  g.output(plain_out(2), a);
  auto full = build(pb.program());
  const at::Tensor x = at::tensor({1.f, -2.f, 3.f});

  SECTION("dead-code elimination") {
    auto p = full->specialize(PlanOptions{{false, true, false}, false});
    REQUIRE(p->instructions().size() == 2);  // relu removed
    CHECK(p->input_used(0));
    std::vector<c10::IValue> out = p->run({x});
    CHECK(out[0].isNone());
    CHECK(out[1].toTensor().equal(-x.abs()));
    CHECK(out[2].isNone());
    auto none = full->specialize(PlanOptions{{false, false, false}, false});
    CHECK(none->instructions().empty());
    CHECK_FALSE(none->input_used(0));
  }
  SECTION("deliver_early: a segment ends after each output-computing instruction") {
    auto p = full->specialize(PlanOptions{{}, true});
    const auto& segs = p->segments();
    REQUIRE(segs.size() == 2);  // [relu] then [abs, neg]: abs computes no output
    CHECK(segs[0].end == 1);
    REQUIRE(segs[0].deliveries.size() == 2);  // o2 (the input, available at once) and o0
    CHECK(segs[1].deliveries.size() == 1);
    Frame frame = p->start({x});
    std::vector<c10::IValue> out(3);
    p->run_segment(frame, out);
    CHECK(out[0].toTensor().equal(x.relu()));
    CHECK(out[2].toTensor().equal(x));
    CHECK(out[1].isNone());
    p->run_segment(frame, out);
    CHECK(out[1].toTensor().equal(-x.abs()));
    // Everything was released or moved out: the frame holds nothing.
    for (const c10::IValue& v : frame.slots) CHECK(v.isNone());
  }
  SECTION("wrong number of flags") {
    CHECK_THROWS_AS(full->specialize(PlanOptions{{true}, false}), FormatError);
  }
}
