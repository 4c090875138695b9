// Model::signature(), the named forward, example_inputs(), to(), and schema 1.4's output names
// (validation, and archives of schema 1.3 without them), on the archives of
// tests/fixtures/make_signature_fixtures.py: tests/python/signature_models.py's KwargsDict,
// forward(x, *, scale) -> {"logits": [N, 4], "hidden": ([N, 8], [N])}; and schema 1.6's input
// structures (Model::call, flatten_inputs, validation) on its ListDict, forward(images: [a, b],
// batch: {"scale", "bias"}).
#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <ATen/core/List.h>
#include <ATen/core/ivalue.h>
#include <torch/optim/sgd.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "assert_close.h"
#include "catch_compat.h"
#include "fixtures.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/input_tree.h"
#include "pt2rt/model.h"
#include "pt2rt/signature.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

std::string fixture(const std::string& file) {
  const char* dir = std::getenv("PT2RT_SIGNATURE_FIXTURES");
  return std::string(dir && *dir ? dir : PT2RT_SIGNATURE_FIXTURES_DIR) + "/" + file;
}

/// Eager PyTorch's inputs and eval-mode outputs (reference.pt): batch 4, or `suffix` "_7".
struct Reference {
  std::vector<at::Tensor> inputs, outputs;
};
Reference reference(const std::string& suffix = "") {
  const char* dir = std::getenv("PT2RT_SIGNATURE_FIXTURES");
  Record r = load_record_in(dir && *dir ? dir : PT2RT_SIGNATURE_FIXTURES_DIR, "reference.pt");
  return {to_tensors(r.at("inputs" + suffix)), to_tensors(r.at("outputs" + suffix))};
}

const std::vector<std::string> kOutputNames = {"['logits']", "['hidden'][0]", "['hidden'][1]"};

void check_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  const Closeness c = assert_close(actual.cpu(), expected.cpu());
  INFO(what << ": " << c.message);
  CHECK(c.ok);
}

void check_static_dims(const TensorSpec& spec, const std::vector<int64_t>& sizes) {
  REQUIRE(spec.sizes.size() == sizes.size());
  for (size_t d = 0; d < sizes.size(); ++d) {
    CHECK(spec.sizes[d].is_static());
    CHECK(spec.sizes[d].size == sizes[d]);
    CHECK(spec.sizes[d].min == sizes[d]);
    CHECK(spec.sizes[d].max == sizes[d]);
  }
}

}  // namespace

TEST_CASE("signature: names, dtypes and shapes of a kwargs + dict-output model", "[signature]") {
  Model m = Model::load(fixture("kwargs_dict.pt2"));
  const Signature& sig = m.signature();
  REQUIRE(sig.inputs.size() == 2);
  CHECK(sig.inputs[0].name == "x");
  CHECK(sig.inputs[1].name == "scale");  // a keyword-only argument of forward()
  for (const TensorSpec& in : sig.inputs) {
    CHECK(in.is_tensor);
    CHECK(in.dtype == c10::kFloat);
    check_static_dims(in, {4, 8});
  }
  REQUIRE(sig.outputs.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(sig.outputs[i].name == kOutputNames[i]);
    CHECK(sig.outputs[i].index == static_cast<int64_t>(i));
    CHECK(sig.outputs[i].dtype == c10::kFloat);
  }
  check_static_dims(sig.outputs[0], {4, 4});
  check_static_dims(sig.outputs[1], {4, 8});
  check_static_dims(sig.outputs[2], {4});
  CHECK(sig.outputs[0].to_string() == "float32[4, 4]");
  CHECK(sig.symbols.empty());
  CHECK(sig.input_index("scale") == 1);
  CHECK(sig.output_index("['hidden'][1]") == 2);
  CHECK(sig.input_index("nope") == -1);
  CHECK(m.program().output_names == kOutputNames);
  CHECK(m.program().schema_minor == kSchemaMinor);
  // Model::save rewrites program.fb (references dropped): the names stay.
  const std::string saved = (std::filesystem::temp_directory_path() /
                             ("pt2rt-signature-" + std::to_string(::getpid()) + ".pt2")).string();
  m.save(saved);
  const Model reloaded = Model::load(saved);
  std::filesystem::remove(saved);
  CHECK(reloaded.program().output_names == kOutputNames);
  CHECK(reloaded.signature().outputs[2].name == kOutputNames[2]);
}

TEST_CASE("signature: symbolic dims and ranges of a dynamic export", "[signature]") {
  Model m = Model::load(fixture("kwargs_dict_dynamic.pt2"));
  const Signature& sig = m.signature();
  REQUIRE(sig.symbols.size() == 1);
  CHECK(sig.symbols[0].name == "batch");
  CHECK(sig.symbols[0].hint == 4);
  CHECK(sig.symbols[0].min == 1);
  CHECK(sig.symbols[0].max == 64);
  REQUIRE(sig.inputs.size() == 2);
  for (const TensorSpec& in : sig.inputs) {
    REQUIRE(in.sizes.size() == 2);
    const DimSpec& batch = in.sizes[0];
    CHECK_FALSE(batch.is_static());
    CHECK(batch.is_symbol);
    CHECK(batch.expr == "batch");
    CHECK(batch.size == 4);
    CHECK(batch.min == 1);
    CHECK(batch.max == 64);
    CHECK(in.sizes[1].is_static());
    CHECK(in.sizes[1].size == 8);
    CHECK(in.to_string() == "float32[batch, 8]");
  }
  REQUIRE(sig.outputs.size() == 3);
  CHECK(sig.outputs[0].to_string() == "float32[batch, 4]");
  CHECK(sig.outputs[2].to_string() == "float32[batch]");
  CHECK(sig.outputs[2].sizes[0].max == 64);

  // The named forward at another batch size inside the range, against eager PyTorch.
  const auto [inputs, expected] = reference("_7");
  NamedTensors out = m.forward({}, {{"scale", inputs[1]}, {"x", inputs[0]}});
  REQUIRE(out.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(out[i].first == kOutputNames[i]);
    check_close(out[i].second, expected[i], out[i].first);
  }
  // Outside the range: InputError naming the input, the symbol and the range.
  CHECK_THROWS_AS(m.forward({at::zeros({65, 8})}, {{"scale", at::ones({65, 8})}}), InputError);
  CHECK_THROWS_WITH(m.forward({at::zeros({65, 8})}, {{"scale", at::ones({65, 8})}}),
                    Contains("input 0 (x) dim 0: batch = 65 is outside [1, 64]"));
}

TEST_CASE("named forward equals positional forward and eager PyTorch", "[signature]") {
  Model m = Model::load(fixture("kwargs_dict.pt2"));
  const auto [inputs, expected] = reference();
  const std::vector<at::Tensor> positional = m.forward(inputs);
  const NamedTensors keyword = m.forward({inputs[0]}, {{"scale", inputs[1]}});
  const NamedTensors all_named = m.forward({}, {{"scale", inputs[1]}, {"x", inputs[0]}});
  REQUIRE(positional.size() == 3);
  REQUIRE(keyword.size() == 3);
  REQUIRE(all_named.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(keyword[i].first == kOutputNames[i]);
    CHECK(all_named[i].first == kOutputNames[i]);
    CHECK(at::equal(keyword[i].second, positional[i]));
    CHECK(at::equal(all_named[i].second, positional[i]));
    check_close(positional[i], expected[i], kOutputNames[i]);
  }
  // In training mode too (the forward graph), with gradients flowing to the parameters.
  m.train();
  NamedTensors train_out = m.forward({}, {{"x", inputs[0]}, {"scale", inputs[1]}});
  REQUIRE(train_out[0].first == "['logits']");
  train_out[0].second.sum().backward();
  CHECK(m.named_parameters()[0].second.grad().defined());
}

TEST_CASE("named forward: unknown, missing and repeated names are one InputError", "[signature]") {
  Model m = Model::load(fixture("kwargs_dict.pt2"));
  const at::Tensor x = at::randn({4, 8}), s = at::rand({4, 8});
  CHECK_THROWS_WITH(m.forward({x}, {{"scale", s}, {"bias", s}}),
                    Contains("unknown input name(s) 'bias'") &&
                        Contains("(the model takes inputs 'x', 'scale')"));
  CHECK_THROWS_WITH(m.forward({x}, {}), Contains("missing input(s) 'scale'"));
  CHECK_THROWS_WITH(m.forward({x}, {{"x", x}, {"scale", s}}),
                    Contains("input(s) given twice 'x'"));
  CHECK_THROWS_WITH(m.forward({}, {{"scale", s}, {"scale", s}}),
                    Contains("input(s) given twice 'scale'") && Contains("missing input(s) 'x'"));
  CHECK_THROWS_WITH(m.forward({x, s, s}, {}),
                    Contains("3 positional inputs for a model that takes 2"));
  CHECK_THROWS_AS(m.forward({x}, {{"bias", s}}), InputError);
  // Then the usual checks, naming the input.
  CHECK_THROWS_WITH(m.forward({}, {{"x", x.to(at::kDouble)}, {"scale", s}}),
                    Contains("input 0 (x): expected float32[4, 8] on cpu, got float64[4, 8]"));
}

TEST_CASE("example_inputs: a bundled example's inputs as tensors", "[signature]") {
  Model m = Model::load(fixture("kwargs_dict.pt2"));
  const auto [inputs, expected] = reference();
  const std::vector<at::Tensor> ex = m.example_inputs();
  REQUIRE(ex.size() == 2);
  CHECK(at::equal(ex[0], inputs[0]));
  CHECK(at::equal(ex[1], inputs[1]));
  CHECK(ex[0].device() == m.device());
  const auto out = m.forward(m.example_inputs(0));
  for (size_t i = 0; i < 3; ++i) check_close(out[i], expected[i], kOutputNames[i]);
  CHECK_THROWS_WITH(m.example_inputs(1),
                    Contains("example 1 requested; the archive bundles 1 (0 to 0)"));
  Model none = Model::load(fixture("kwargs_dict_noex.pt2"));
  CHECK_THROWS_AS(none.example_inputs(), InputError);
  CHECK_THROWS_WITH(none.example_inputs(), Contains("bundles no example"));
}

TEST_CASE("to(device): weights move in place, parameters keep their identity", "[signature]") {
  Model m = Model::load(fixture("kwargs_dict.pt2"));
  const auto [inputs, expected] = reference();
  const std::vector<at::Tensor> params = m.parameters();
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.1));

  m.to(c10::kCPU);  // CPU -> CPU: nothing moves, everything keeps working
  CHECK(m.device() == c10::Device(c10::kCPU));
  REQUIRE(m.parameters().size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) CHECK(m.parameters()[i].is_same(params[i]));
  auto out = m.forward(inputs);
  for (size_t i = 0; i < 3; ++i) check_close(out[i], expected[i], kOutputNames[i]);

  if (!at::hasCUDA()) {
    WARN("no CUDA device: Model::to(cuda) not exercised here");
    return;
  }
  m.train();
  m.forward(inputs)[0].sum().backward();  // a .grad() on CPU, to be moved along
  m.to(c10::Device(c10::kCUDA, 0));
  CHECK(m.device().is_cuda());
  for (size_t i = 0; i < params.size(); ++i) {
    CHECK(m.parameters()[i].is_same(params[i]));  // the optimizer's tensors, now on CUDA
    CHECK(params[i].is_cuda());
    CHECK(params[i].grad().is_cuda());
  }
  opt.step();  // torch::optim works on the moved parameters
  m.eval();
  const at::Tensor x = inputs[0].cuda(), s = inputs[1].cuda();
  const NamedTensors on_cuda = m.forward({x}, {{"scale", s}});
  m.to(c10::kCPU);
  const auto back = m.forward(inputs);
  for (size_t i = 0; i < 3; ++i) check_close(on_cuda[i].second, back[i], kOutputNames[i]);
  CHECK_THROWS_AS(m.forward({x}, {{"scale", s}}), InputError);  // inputs on the old device
}

TEST_CASE("an archive of schema 1.3 loads and runs; its outputs are named positionally",
          "[signature]") {
  Model m = Model::load(fixture("kwargs_dict_1_3.pt2"));
  CHECK(m.program().schema_minor == 3);
  CHECK(m.program().output_names.empty());
  const Signature& sig = m.signature();
  REQUIRE(sig.outputs.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(sig.outputs[i].name == "[" + std::to_string(i) + "]");
  CHECK(sig.inputs[1].name == "scale");
  const auto [inputs, expected] = reference();
  const NamedTensors out = m.forward({inputs[0]}, {{"scale", inputs[1]}});
  REQUIRE(out.size() == 3);
  CHECK(out[1].first == "[1]");
  for (size_t i = 0; i < 3; ++i) check_close(out[i].second, expected[i], out[i].first);
}

TEST_CASE("damaged output names are a FormatError naming what is wrong", "[signature][hostile]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"count", "program.fb: 2 output names for 3 user outputs"},
      {"empty", "output name 1 is 0 bytes long (1 to 256 allowed)"},
      {"long", "output name 1 is 257 bytes long (1 to 256 allowed)"},
      {"control", "output name 1 holds a control character"},
      {"duplicate", "output name 1 '['logits']' is used twice"},
  };
  for (const auto& [name, message] : cases) {
    INFO(name);
    CHECK_THROWS_AS(Model::load(fixture("bad_names_" + name + ".pt2")), FormatError);
    CHECK_THROWS_WITH(Model::load(fixture("bad_names_" + name + ".pt2")), Contains(message));
  }
}

// ---- schema 1.6: inputs that are a list and a dict (signature_models.ListDict) ----------

namespace {

/// ListDict's eager inputs (a, b, scale, bias) and its eval output (list_dict.pt).
Reference list_dict_reference() {
  const char* dir = std::getenv("PT2RT_SIGNATURE_FIXTURES");
  Record r = load_record_in(dir && *dir ? dir : PT2RT_SIGNATURE_FIXTURES_DIR, "list_dict.pt");
  return {to_tensors(r.at("inputs")), to_tensors(r.at("outputs"))};
}

c10::IValue tensor_dict(const at::Tensor& scale, const at::Tensor& bias) {
  c10::Dict<std::string, at::Tensor> d;
  d.insert("scale", scale);
  d.insert("bias", bias);
  return d;
}

}  // namespace

TEST_CASE("call: a list and a dict of tensors, as forward() took them, equal eager PyTorch",
          "[signature]") {
  Model m = Model::load(fixture("list_dict.pt2"));
  const Signature& sig = m.signature();
  REQUIRE(sig.params.size() == 2);
  CHECK(sig.params[0].name == "images");
  CHECK(input_spec_string(sig.params[0].spec) == "list[Tensor, Tensor]");
  CHECK(input_spec_string(sig.params[1].spec) == "dict['scale': Tensor, 'bias': Tensor]");
  REQUIRE(sig.inputs.size() == 4);
  CHECK(sig.inputs[1].name == "images[1]");
  CHECK(sig.inputs[3].name == "batch['bias']");
  const auto [in, expected] = list_dict_reference();
  const c10::IValue images = c10::List<at::Tensor>({in[0], in[1]});
  const c10::IValue batch = tensor_dict(in[2], in[3]);
  check_close(m.call({images, batch}, {}).at(0).second, expected[0], "positional");
  check_close(m.call({}, {{"batch", batch}, {"images", images}}).at(0).second, expected[0],
              "by name");
  // a tuple where a list was exported; the flat forward by input name
  check_close(m.call({c10::ivalue::Tuple::create({in[0], in[1]}), batch}, {}).at(0).second,
              expected[0], "tuple for list");
  check_close(m.forward({in[0], in[1], in[2], in[3]}).at(0), expected[0], "flat");
  // training: one forward + backward through the list and the dict
  m.train(true);
  const NamedTensors out = m.call({images, batch}, {});
  out.at(0).second.sum().backward();
  for (const auto& [fqn, p] : m.named_parameters()) {
    INFO(fqn);
    CHECK(p.grad().defined());
  }
}

TEST_CASE("call: a value whose structure is not the exported one is an InputError naming it",
          "[signature]") {
  Model m = Model::load(fixture("list_dict.pt2"));
  const auto [in, expected] = list_dict_reference();
  const c10::IValue batch = tensor_dict(in[2], in[3]);
  const std::vector<std::pair<std::vector<c10::IValue>, std::string>> cases = {
      {{c10::List<at::Tensor>({in[0]}), batch},
       "input 'images': expected list[Tensor, Tensor], got a list of 1"},
      {{in[0], batch}, "input 'images': expected list[Tensor, Tensor], got a tensor"},
      {{c10::List<at::Tensor>({in[0], in[1]}), tensor_dict(in[2], in[3]).toGenericDict().copy()},
       ""},
      {{c10::List<at::Tensor>({in[0], in[1]})}, "missing input(s) 'batch'"},
  };
  for (const auto& [args, message] : cases) {
    INFO(message);
    if (message.empty()) {
      CHECK_NOTHROW(m.call(args, {}));
      continue;
    }
    CHECK_THROWS_AS(m.call(args, {}), InputError);
    CHECK_THROWS_WITH(m.call(args, {}), Contains(message));
  }
  c10::Dict<std::string, at::Tensor> wrong;
  wrong.insert("scale", in[2]);
  wrong.insert("shift", in[3]);
  CHECK_THROWS_WITH(m.call({c10::List<at::Tensor>({in[0], in[1]}), wrong}, {}),
                    Contains("input 'batch': expected dict['scale': Tensor, 'bias': Tensor]"));
}

TEST_CASE("damaged input structures are a FormatError naming what is wrong",
          "[signature][hostile]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"count", "the input parameters hold 3 tensors for 4 user inputs"},
      {"keys", "input 'batch': 1 keys for 2 children"},
      {"duplicate_key", "input 'batch' key 1 'scale' is used twice"},
      {"deep", "nests more than 16 levels"},
      {"kind", "input 'batch': unknown InputSpecKind 7"},
      {"name", "input parameter name 1 'images' is used twice"},
  };
  for (const auto& [name, message] : cases) {
    INFO(name);
    CHECK_THROWS_AS(Model::load(fixture("bad_inputs_" + name + ".pt2")), FormatError);
    CHECK_THROWS_WITH(Model::load(fixture("bad_inputs_" + name + ".pt2")), Contains(message));
  }
}
