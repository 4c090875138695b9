// Runtime errors and queries on exported archives: InputError wording, unknown ops and
// argument-kind mismatches in a real program, descriptors queries, device placement.
#include <ATen/ATen.h>
#include "catch_compat.h"

#include <algorithm>

#include "assert_close.h"
#include "fixtures.h"
#include "model/model_impl.h"
#include "plan/op_resolution.h"
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
    const std::vector<Example> examples = m.examples();
    REQUIRE_FALSE(examples.empty());
    const Example& ex = examples[0];
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

TEST_CASE("operators and arguments of another torch version are reported in one "
          "OpResolutionError", "[errors]") {
  Loaded l = load_parts("mlp");
  Program& p = *l.program;
  p.producer.torch_version = "9.9.0";
  auto index_of = [&](const std::string& qualified) {
    for (size_t i = 0; i < p.operators.size(); ++i) {
      if (p.operators[i].qualified() == qualified) return i;
    }
    FAIL("no operator " << qualified);
    return size_t(0);
  };
  const size_t addmm = index_of("aten::addmm"), relu = index_of("aten::relu"),
               t = index_of("aten::t");
  // A newer torch's addmm with a keyword argument this LibTorch lacks, a relu with an extra
  // positional one, and an operator this LibTorch does not have at all.
  p.operators[addmm].schema =
      "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1, "
      "bool future_flag=False) -> Tensor";
  p.operators[relu].schema = "aten::relu(Tensor self, int future_positional=0) -> Tensor";
  p.operators[t].name = "aten::t_from_the_future";
  size_t addmm_nodes = 0;
  for (Graph& g : p.graphs) {
    for (Node& n : g.nodes) {
      if (n.op == addmm) {
        n.args.push_back(Argument{"future_flag", true, true});
        ++addmm_nodes;
      }
      if (n.op == relu) n.args.push_back(Argument{"future_positional", int64_t(3), false});
    }
  }
  REQUIRE(addmm_nodes > 1);

  SECTION("every operator and argument, once, with both torch versions") {
    try {
      Model::from_program(l.program, l.weights);
      FAIL("expected OpResolutionError");
    } catch (const OpResolutionError& e) {
      std::vector<std::string> got = e.missing();
      std::sort(got.begin(), got.end());
      CHECK(got == std::vector<std::string>{"aten::addmm(future_flag)",
                                            "aten::relu(future_positional)",
                                            "aten::t_from_the_future"});
      CHECK_THAT(e.what(), Contains("exported with torch 9.9.0") &&
                               Contains("running torch " + running_torch_version()) &&
                               Contains("1 operator is not available") &&
                               Contains("2 arguments do not fit") &&
                               Contains("argument 'future_flag' is not in the running") &&
                               Contains("and " + std::to_string(addmm_nodes - 1) + " more node"));
    }
  }
  SECTION("the same mismatch against the schema the archive recorded is a damaged archive") {
    p.operators[t].name = "aten::t";
    p.operators[relu].schema = "";  // no recorded schema to differ from
    p.operators[addmm].schema = "";
    CHECK_THROWS_AS(Model::from_program(l.program, l.weights), FormatError);
    CHECK_THROWS_WITH(Model::from_program(l.program, l.weights),
                      Contains("is not in the running LibTorch's schema"));
  }
}
