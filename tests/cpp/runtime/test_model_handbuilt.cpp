// pt2rt::Model on a hand-built program (no exporter): the autograd Function, buffer
// mutation, eval vs train, non-differentiable outputs, input checks.
//
// The program computes, for a parameter w[3] and a buffer count (int64 scalar):
//   inference: y = x * w, k = argmax(y)
//   forward:   y = x * w, k = argmax(y), count <- count + 1, Saved(0) = x
//   backward:  Grad(w) = tangent(y) * Saved(0)
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include "catch_compat.h"
#include <torch/csrc/autograd/autograd.h>

#include "program_builder.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"
#include "pt2rt/queries.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

namespace {

std::shared_ptr<Program> scale_program(bool input_grad = false, bool no_vc_check = false) {
  ProgramBuilder pb;
  pb.reserve_graphs(3);
  pb.weight("w", WeightKind::Parameter, at::kFloat, {3}, true);
  pb.weight("count", WeightKind::Buffer, at::kLong, {});
  {
    auto g = pb.graph(GraphRole::Inference);
    ValueId w = g.input(param("w"), tensor_value("w", at::kFloat, {3}));
    g.input(buffer("count"), tensor_value("count", at::kLong, {}));
    ValueId x = g.input(plain(0), tensor_value("x", at::kFloat, {3}));
    ValueId y = g.node("aten::mul", "Tensor", {tensor_arg(x), tensor_arg(w)},
                       {tensor_value("y", at::kFloat, {3})})[0];
    ValueId k = g.node("aten::argmax", "", {tensor_arg(y)}, {tensor_value("k", at::kLong, {})})[0];
    g.output(plain_out(0), y);
    g.output(plain_out(1), k);
  }
  {
    auto g = pb.graph(GraphRole::Forward);
    ValueId w = g.input(param("w"), tensor_value("w", at::kFloat, {3}));
    ValueId count = g.input(buffer("count"), tensor_value("count", at::kLong, {}));
    ValueId x = g.input(plain(0), tensor_value("x", at::kFloat, {3}));
    ValueId y = g.node("aten::mul", "Tensor", {tensor_arg(x), tensor_arg(w)},
                       {tensor_value("y", at::kFloat, {3})})[0];
    ValueId k = g.node("aten::argmax", "", {tensor_arg(y)}, {tensor_value("k", at::kLong, {})})[0];
    ValueId c1 = g.node("aten::add", "Scalar", {tensor_arg(count), arg(c10::Scalar(int64_t(1)))},
                        {tensor_value("count_1", at::kLong, {})})[0];
    g.output(plain_out(0), y);
    g.output(plain_out(1), k);
    g.output(mutation_of(buffer("count")), c1);
    g.output(no_vc_check ? saved_no_vc_out(0) : saved_out(0), x);
    if (input_grad) g.output(saved_out(1), w);
  }
  {
    auto g = pb.graph(GraphRole::Backward);
    ValueId s = g.input(saved_in(0), tensor_value("x", at::kFloat, {3}));
    ValueId t = g.input(tangent(0), tensor_value("tangent_y", at::kFloat, {3}));
    ValueId gw = g.node("aten::mul", "Tensor", {tensor_arg(t), tensor_arg(s)},
                        {tensor_value("grad_w", at::kFloat, {3})})[0];
    g.output(grad_of(param("w")), gw);
    if (input_grad) {
      ValueId sw = g.input(saved_in(1), tensor_value("w", at::kFloat, {3}));
      ValueId gx = g.node("aten::mul", "Tensor", {tensor_arg(t), tensor_arg(sw)},
                          {tensor_value("grad_x", at::kFloat, {3})})[0];
      g.output(grad_of(plain(0)), gx);
    }
  }
  return pb.program();
}

Model scale_model() {
  return Model::from_program(scale_program(), {at::tensor({1.f, 2.f, 3.f}), at::scalar_tensor(5, at::kLong)});
}

}  // namespace

TEST_CASE("SavedNoVcCheck activations are kept without a version-counter check",
          "[model][autograd]") {
  // AOTAutograd's SavedForBackwardsNoVcCheckAOTOutput: an activation eager would stash on ctx
  // (no save_for_backward); modifying it in place after the forward is then no error.
  for (bool no_vc_check : {false, true}) {
    INFO("SavedNoVcCheck: " << no_vc_check);
    Model m = Model::from_program(scale_program(false, no_vc_check),
                                  {at::tensor({1.f, 2.f, 3.f}), at::scalar_tensor(5, at::kLong)});
    m.train();
    at::Tensor x = at::tensor({1.f, -2.f, 3.f});
    at::Tensor loss = m.forward({x})[0].sum();
    x.add_(1);  // bumps the version of Saved(0) (= x) after the forward kept it
    if (no_vc_check) {
      loss.backward();
      CHECK(m.parameters()[0].grad().equal(x));  // d(sum(x*w))/dw read from the stashed x
    } else {
      CHECK_THROWS_WITH(loss.backward(), Contains("modified by an inplace operation"));
    }
  }
}

TEST_CASE("training forward is one autograd node: grads, buffers, non-differentiable outputs",
          "[model][autograd]") {
  Model m = scale_model();
  CHECK_FALSE(m.is_training());  // eval after load
  m.train();
  at::Tensor x = at::tensor({4.f, -1.f, 0.5f});
  auto out = m.forward({x});
  REQUIRE(out.size() == 2);
  CHECK(out[0].equal(x * at::tensor({1.f, 2.f, 3.f})));
  CHECK(out[0].requires_grad());
  CHECK(out[0].grad_fn() != nullptr);
  CHECK_FALSE(out[1].requires_grad());  // int64 argmax
  CHECK(out[1].item<int64_t>() == 0);
  CHECK(m.named_buffers()[0].second.item<int64_t>() == 6);  // InputMutation copied back

  (out[0] * at::tensor({1.f, 10.f, 100.f})).sum().backward();
  at::Tensor w = m.parameters()[0];
  REQUIRE(w.grad().defined());
  CHECK(w.grad().equal(at::tensor({4.f, -10.f, 50.f})));
}

TEST_CASE("input gradients flow when a user input requires grad but has no Grad output",
          "[model][autograd]") {
  Model m = scale_model();
  m.train();
  at::Tensor x = at::tensor({1.f, 1.f, 1.f}).set_requires_grad(true);
  auto out = m.forward({x});
  out[0].sum().backward();
  // The archive has no Grad(of=Plain(0)): x gets no gradient (documented), w does.
  CHECK_FALSE(x.grad().defined());
  CHECK(m.parameters()[0].grad().equal(at::ones({3})));
}

TEST_CASE("Grad(of=Plain(i)) outputs reach user inputs that require grad", "[model][autograd]") {
  Model m = Model::from_program(scale_program(true),
                                {at::tensor({1.f, 2.f, 3.f}), at::scalar_tensor(0, at::kLong)});
  m.train();
  at::Tensor x = at::tensor({4.f, 5.f, 6.f}).set_requires_grad(true);
  auto out = m.forward({x});
  (out[0] * 2).sum().backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().equal(at::tensor({2.f, 4.f, 6.f})));
  CHECK(m.parameters()[0].grad().equal(at::tensor({8.f, 10.f, 12.f})));
  // The Model may be gone before backward runs: its autograd nodes keep the state alive.
  at::Tensor y;
  {
    Model tmp = Model::from_program(scale_program(true),
                                    {at::tensor({1.f, 1.f, 1.f}), at::scalar_tensor(0, at::kLong)});
    tmp.train();
    y = tmp.forward({x})[0];
  }
  x.mutable_grad() = at::Tensor();
  y.sum().backward();
  CHECK(x.grad().equal(at::ones({3})));
}

TEST_CASE("eval mode and no-grad run the inference graph under InferenceMode", "[model]") {
  Model m = scale_model();
  auto out = m.forward({at::tensor({1.f, 2.f, 3.f})});
  CHECK(out[0].is_inference());
  CHECK(m.named_buffers()[0].second.item<int64_t>() == 5);  // inference graph does not mutate
  m.train();
  {
    c10::NoGradGuard no_grad;
    auto out2 = m.forward({at::tensor({1.f, 2.f, 3.f})});
    CHECK(out2[0].is_inference());
  }
  CHECK(m.named_buffers()[0].second.item<int64_t>() == 5);
}

TEST_CASE("wrong user inputs raise InputError naming the input", "[model][inputs]") {
  Model m = scale_model();
  for (bool training : {false, true}) {
    m.train(training);
    CHECK_THROWS_WITH(m.forward({}), Contains("expected 1 input (x), got 0"));
    CHECK_THROWS_AS(m.forward({at::ones({3}), at::ones({3})}), InputError);
    CHECK_THROWS_WITH(m.forward({at::ones({3}, at::kDouble)}),
                      Contains("input 0 (x): expected float32[3] on cpu, got float64[3]"));
    CHECK_THROWS_WITH(m.forward({at::ones({3, 1})}),
                      Contains("input 0 (x): expected float32[3] on cpu, got float32[3, 1]"));
    CHECK_THROWS_WITH(m.forward({at::ones({4})}),
                      Contains("input 0 (x): expected float32[3] on cpu, got float32[4]"));
    CHECK_THROWS_WITH(m.forward({at::empty({3}, at::TensorOptions().device(at::kMeta))}),
                      Contains("input 0 (x): expected float32[3] on cpu, got float32[3] on meta"));
    CHECK_THROWS_WITH(m.forward({at::Tensor()}), Contains("got an undefined tensor"));
  }
}

TEST_CASE("AOTAutograd FX-utility queries pair inputs with grads and outputs with tangents",
          "[queries]") {
  auto p = scale_program();
  auto params = get_param_and_grad_nodes(*p);
  REQUIRE(params.size() == 1);
  CHECK(params[0].descriptor.fqn == "w");
  CHECK(params[0].input.graph == GraphRole::Forward);
  REQUIRE(params[0].grad.has_value());
  CHECK(params[0].grad->graph == GraphRole::Backward);
  CHECK(params[0].grad->name == "grad_w");

  auto buffers = get_named_buffer_nodes(*p);
  REQUIRE(buffers.size() == 1);
  CHECK(buffers[0].first == "count");
  CHECK(buffers[0].second.position == 1);

  auto plain_inputs = get_plain_input_and_grad_nodes(*p);
  REQUIRE(plain_inputs.size() == 1);
  CHECK(plain_inputs[0].input.name == "x");
  CHECK_FALSE(plain_inputs[0].grad.has_value());

  auto outs = get_all_output_and_tangent_nodes(*p);
  REQUIRE(outs.size() == 3);  // y, k, count mutation (not the Saved activation)
  REQUIRE(outs[0].tangent.has_value());
  CHECK(outs[0].tangent->name == "tangent_y");
  CHECK_FALSE(outs[1].tangent.has_value());
  CHECK(outs[2].descriptor.kind == OutputKind::InputMutation);
}

TEST_CASE("descriptors this runtime does not handle fail the load, naming them", "[model][errors]") {
  auto p = scale_program();
  InputDescriptor seed;
  seed.kind = InputKind::PhiloxForwardSeed;
  p->graphs[1].inputs.push_back(GraphInput{0, seed});
  CHECK_THROWS_AS(Model::from_program(p, {at::ones({3}), at::scalar_tensor(0, at::kLong)}), FormatError);
  CHECK_THROWS_WITH(Model::from_program(p, {at::ones({3}), at::scalar_tensor(0, at::kLong)}),
                    Contains("PhiloxForwardSeed"));
}
