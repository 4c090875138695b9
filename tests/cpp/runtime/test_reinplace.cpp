// In-place twins of elementwise ops whose input dies (runtime/plan/reinplace.h), on hand-built
// one-node plans. In place is observable only through the result's storage: the test hands
// the plan the sole reference to its input and checks whether the result reuses that
// storage; every case also checks the values, dtype, sizes and strides against the
// out-of-place op, and that tensors the caller still sees are untouched.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include "catch_compat.h"

#include "plan/op_resolution.h"
#include "plan/plan.h"
#include "program_builder.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

/// The plan of `pb`'s first graph on CPU.
std::unique_ptr<ExecutionPlan> build_plan(ProgramBuilder& pb) {
  auto p = pb.program();
  return ExecutionPlan::build(p, p->graphs[0], resolve_operators(*p), c10::kCPU);
}

/// A plan of `op.overload(x[, y])` whose result is the graph's only output.
std::unique_ptr<ExecutionPlan> one_node(const std::string& op, const std::string& overload, const at::Tensor& x,
                 const at::Tensor* y = nullptr) {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  std::vector<Argument> args{tensor_arg(g.input(plain(0), tensor_value("x", x.scalar_type(), x.sizes().vec())))};
  if (y) args.push_back(tensor_arg(g.input(plain(1), tensor_value("y", y->scalar_type(), y->sizes().vec()))));
  ValueId r = g.node(op, overload, args, {tensor_value("r", x.scalar_type(), x.sizes().vec())})[0];
  g.output(plain_out(0), r);
  return build_plan(pb);
}

struct Outcome {
  at::Tensor result;
  bool reused;  ///< the result lives in the input's storage
};

/// Runs the plan on `x` (moved in: when the caller keeps no other reference, the frame holds
/// the only one) and `y`.
Outcome run(const ExecutionPlan& plan, at::Tensor x, const at::Tensor* y = nullptr) {
  const void* storage = x.storage().data();
  std::vector<c10::IValue> in;
  in.emplace_back(std::move(x));
  if (y) in.emplace_back(*y);
  at::Tensor r = plan.run(std::move(in)).at(0).toTensor();
  return {r, r.storage().data() == storage};
}

void check_same_as_out_of_place(const at::Tensor& got, const at::Tensor& want) {
  CHECK(got.scalar_type() == want.scalar_type());
  CHECK(got.sizes() == want.sizes());
  CHECK(got.strides() == want.strides());
  CHECK(got.equal(want));
}

}  // namespace

TEST_CASE("reinplace: an op whose input dies is marked; one whose input is read later is not",
          "[plan][reinplace]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId x = g.input(plain(0), tensor_value("x", at::kFloat, {4}));
  ValueId a = g.node("aten::relu", "", {tensor_arg(x)}, {tensor_value("a", at::kFloat, {4})})[0];
  ValueId b = g.node("aten::neg", "", {tensor_arg(a)}, {tensor_value("b", at::kFloat, {4})})[0];
  ValueId c = g.node("aten::sigmoid", "", {tensor_arg(a)}, {tensor_value("c", at::kFloat, {4})})[0];
  ValueId d = g.node("aten::mul", "Tensor", {tensor_arg(c), tensor_arg(b)},
                     {tensor_value("d", at::kFloat, {4})})[0];
  g.output(plain_out(0), d);
  auto plan = build_plan(pb);
  const auto& ins = plan->instructions();
  REQUIRE(ins.size() == 4);
  CHECK(ins[0].inplace.has_value());   // relu(x): x's last read
  CHECK(!ins[1].inplace.has_value());  // neg: no twin in the table
  CHECK(ins[2].inplace.has_value());   // sigmoid(a): a's last read (after neg)
  CHECK(ins[3].inplace.has_value());   // mul(c, b)
  c10::NoGradGuard no_grad;
  at::Tensor in = at::randn({4});
  const at::Tensor want = in.relu().neg() * in.relu().sigmoid();
  Outcome o = run(*plan, in.clone());
  CHECK(o.reused);
  check_same_as_out_of_place(o.result, want);
}

TEST_CASE("reinplace: the twin runs only when nothing else can see the input",
          "[plan][reinplace]") {
  const at::Tensor base = at::randn({8, 16});
  auto relu = one_node("aten::relu", "", base);
  c10::NoGradGuard no_grad;

  SECTION("sole owner: in place, same values and layout") {
    Outcome o = run(*relu, base.clone());
    CHECK(o.reused);
    check_same_as_out_of_place(o.result, base.relu());
  }
  SECTION("the caller keeps a reference: out of place, the input untouched") {
    at::Tensor x = base.clone();
    Outcome o = run(*relu, x);
    CHECK(!o.reused);
    CHECK(x.equal(base));
    check_same_as_out_of_place(o.result, base.relu());
  }
  SECTION("a view shares the storage: out of place, the view untouched") {
    at::Tensor x = base.clone();
    at::Tensor view = x.view({128});
    Outcome o = run(*relu, std::move(x));
    CHECK(!o.reused);
    CHECK(view.equal(base.view({128})));
  }
  SECTION("grad mode on: out of place (autograd would record the call)") {
    c10::AutoGradMode grad(true);
    Outcome o = run(*relu, base.clone());
    CHECK(!o.reused);
    check_same_as_out_of_place(o.result, base.relu());
  }
  SECTION("a non-contiguous input: out of place, the layout the out-of-place op gives") {
    auto relu_t = one_node("aten::relu", "", base.t());
    Outcome o = run(*relu_t, base.clone().t());
    CHECK(!o.reused);
    check_same_as_out_of_place(o.result, base.t().relu());
  }
  SECTION("an integral input of a floating-only op: out of place, the promoted dtype") {
    const at::Tensor ints = at::arange(-4, 4, at::kLong);
    auto sigmoid = one_node("aten::sigmoid", "", ints);
    Outcome o = run(*sigmoid, ints.clone());
    CHECK(!o.reused);
    check_same_as_out_of_place(o.result, ints.sigmoid());
  }
}

TEST_CASE("reinplace: a binary op runs in place only when the result keeps self's dtype, "
          "sizes and strides", "[plan][reinplace]") {
  c10::NoGradGuard no_grad;
  const at::Tensor x = at::randn({4, 6});
  auto check = [&](const at::Tensor& y, bool expect_in_place) {
    auto add = one_node("aten::add", "Tensor", x, &y);
    Outcome o = run(*add, x.clone(), &y);
    CHECK(o.reused == expect_in_place);
    check_same_as_out_of_place(o.result, x + y);
  };
  SECTION("same sizes and strides") { check(at::randn({4, 6}), true); }
  SECTION("a 0-dim tensor of the same dtype") { check(at::scalar_tensor(2.5), true); }
  SECTION("a broadcast operand") { check(at::randn({6}), false); }
  SECTION("an operand that promotes the dtype") { check(at::randn({4, 6}, at::kDouble), false); }
  SECTION("a transposed operand") { check(at::randn({6, 4}).t(), false); }
  SECTION("self as both operands") {
    ProgramBuilder pb;
    auto g = pb.graph(GraphRole::Inference);
    ValueId v = g.input(plain(0), tensor_value("x", at::kFloat, {4, 6}));
    ValueId r = g.node("aten::add", "Tensor", {tensor_arg(v), tensor_arg(v)},
                       {tensor_value("r", at::kFloat, {4, 6})})[0];
    g.output(plain_out(0), r);
    auto plan = build_plan(pb);
    Outcome o = run(*plan, x.clone());
    CHECK(o.reused);
    check_same_as_out_of_place(o.result, x + x);
  }
}
