// Runtime errors and queries on exported archives: InputError wording, unknown ops and
// argument-kind mismatches in a real program, descriptors queries, device placement.
#include <ATen/ATen.h>
#include "catch_compat.h"

#include "assert_close.h"
#include "fixtures.h"
#include "model_impl.h"
#include "pt2rt/archive.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"
#include "pt2rt/queries.h"
#include "pt2rt/weights.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

namespace {

struct Loaded {
  std::shared_ptr<Program> program;
  std::vector<at::Tensor> weights;
};

/// The decoded program (a mutable copy) and weights of a fixture archive.
Loaded load_parts(const std::string& name) {
  Archive a = Archive::open(archive_path(name, "default"));
  std::vector<uint8_t> bytes = a.read(kProgramEntry);
  auto program = decode_program(bytes.data(), bytes.size());
  return Loaded{std::make_shared<Program>(*program), load_weights(a, *program, c10::kCPU)};
}

}  // namespace

TEST_CASE("InputError messages name the input as the issue specifies", "[inputs]") {
  Model m = Model::load(archive_path("mlp", "default"));
  CHECK_THROWS_AS(m.forward({at::ones({4, 16}, at::kDouble)}), InputError);
  CHECK_THROWS_WITH(m.forward({at::ones({4, 16}, at::kDouble)}),
                    "pt2rt::InputError: input 0 (x): expected float32[4, 16] on cpu, "
                    "got float64[4, 16]");
  Model two = Model::load(archive_path("two_io", "min_cut"));
  two.train();
  CHECK_THROWS_WITH(two.forward({at::ones({4, 8})}), Contains("expected 2 inputs (x, y), got 1"));
  CHECK_THROWS_WITH(two.forward({at::ones({4, 8}), at::ones({4, 4})}),
                    Contains("input 1 (y): expected float32[4, 3] on cpu, got float32[4, 4]"));
}

TEST_CASE("an op unknown to this LibTorch fails the load with OpResolutionError", "[errors]") {
  Loaded l = load_parts("cnn_bn");
  REQUIRE(l.program->operators.size() > 2);
  l.program->operators[0].name = "aten::op_from_the_future";
  l.program->operators[2].overload = "future_overload";
  std::string renamed = l.program->operators[2].qualified();
  try {
    Model::from_program(l.program, l.weights);
    FAIL("expected OpResolutionError");
  } catch (const OpResolutionError& e) {
    CHECK_THAT(e.what(), Contains("2 operators are not available"));
    CHECK_THAT(e.what(), Contains("aten::op_from_the_future"));
    CHECK_THAT(e.what(), Contains(renamed));
    CHECK_THAT(e.what(), Contains("exported with torch " + l.program->producer.torch_version));
  }
}

TEST_CASE("an argument whose kind does not fit the runtime schema fails the load", "[errors]") {
  Loaded l = load_parts("mlp");
  Graph& g = l.program->graphs[0];
  // The first node with a tensor argument gets a string there instead.
  for (Node& n : g.nodes) {
    auto it = std::find_if(n.args.begin(), n.args.end(), [](const Argument& a) {
      return std::holds_alternative<TensorRef>(a.value);
    });
    if (it == n.args.end()) continue;
    it->value = std::string("not a tensor");
    std::string fx = n.debug.fx_name;
    CHECK_THROWS_AS(Model::from_program(l.program, l.weights), FormatError);
    CHECK_THROWS_WITH(Model::from_program(l.program, l.weights),
                      Contains("'" + fx + "'") && Contains("gives a str"));
    return;
  }
  FAIL("no node with a tensor argument");
}

TEST_CASE("FX-utility queries on exported programs", "[queries]") {
  Model mlp = Model::load(archive_path("mlp", "min_cut"));
  auto params = get_param_and_grad_nodes(mlp.program());
  REQUIRE(params.size() == mlp.parameters().size());
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].descriptor.fqn == mlp.named_parameters()[i].first);
    CHECK(params[i].grad.has_value());
  }
  Model frozen = Model::load(archive_path("frozen", "default"));
  for (const InputAndGrad& p : get_param_and_grad_nodes(frozen.program())) {
    INFO(p.descriptor.fqn);
    CHECK(p.grad.has_value() == (p.descriptor.fqn.rfind("backbone.", 0) != 0));
  }
  auto buffers = get_named_buffer_nodes(frozen.program());
  REQUIRE(buffers.size() == frozen.named_buffers().size());
  CHECK(buffers[0].first == "backbone.1.running_mean");

  Model two = Model::load(archive_path("two_io", "default"));
  auto outs = get_all_output_and_tangent_nodes(two.program());
  REQUIRE(outs.size() == 2);
  CHECK(outs[0].tangent.has_value());        // float logits
  CHECK_FALSE(outs[1].tangent.has_value());  // int64 argmax
  auto plain = get_plain_input_and_grad_nodes(two.program());
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].input.name == "x");
  CHECK(plain[1].input.name == "y");
}

TEST_CASE("the bundled example references agree with the runtime", "[parity]") {
  for (const std::string name : {"mlp", "two_io"}) {
    Model m = Model::load(archive_path(name, "default"));
    REQUIRE_FALSE(m.program().examples.empty());
    const Example& ex = m.program().examples[0];
    REQUIRE(ex.references.has_value());
    std::vector<at::Tensor> inputs;
    for (const TensorData& t : ex.inputs) {
      inputs.push_back(at::from_blob(const_cast<uint8_t*>(t.data.data()), t.sizes,
                                     at::TensorOptions().dtype(t.dtype)).clone());
    }
    auto out = m.forward(inputs);
    REQUIRE(out.size() == ex.references->outputs.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const TensorData& r = ex.references->outputs[i];
      at::Tensor want = at::from_blob(const_cast<uint8_t*>(r.data.data()), r.sizes,
                                      at::TensorOptions().dtype(r.dtype));
      CHECK(assert_close(out[i], want).message == "");
    }
  }
}
