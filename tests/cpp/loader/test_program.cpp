// tests/cpp/loader/test_program.cpp — decode_program: round trip, descriptors, and the
// table of bad programs (one mutation of the fixture each).
#include "catch_compat.h"

#include <functional>

#include "fixture.h"
#include "pt2rt/archive.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/program.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;
using pt2rt::test::register_test_case;

namespace {

std::shared_ptr<const Program> decode(const fbs::ProgramT& p) {
  const std::vector<uint8_t> bytes = pack(p);
  return decode_program(bytes.data(), bytes.size());
}

fbs::GraphT& graph(fbs::ProgramT& p, fbs::GraphRole role) {
  for (auto& g : p.graphs) {
    if (g->role == role) return *g;
  }
  throw std::logic_error("no such graph");
}

}  // namespace

TEST_CASE("program: fixture decodes to the expected IR", "[loader][program]") {
  auto p = decode(*make_program());
  CHECK(p->schema_major == 1);
  CHECK(p->schema_minor == kSchemaMinor);
  CHECK(p->producer.torch_version == "1.13.1");
  REQUIRE(p->operators.size() == 3);
  CHECK(p->operators[0].qualified() == "aten::mul.Tensor");
  CHECK(p->operators[1].qualified() == "aten::relu");
  REQUIRE(p->weights.size() == 3);
  CHECK(p->weights[0].fqn == "w");
  CHECK(p->weights[0].requires_grad);
  CHECK(p->weights[0].sizes == std::vector<int64_t>{2, 3});
  CHECK(p->weights[0].byte_length == 24);
  CHECK(p->weights[2].kind == WeightKind::Buffer);
  CHECK(p->weights[2].dtype == c10::ScalarType::Long);
  CHECK(p->metadata.at("model") == "fixture");

  const Graph* inf = p->graph(GraphRole::Inference);
  const Graph* fwd = p->graph(GraphRole::Forward);
  const Graph* bwd = p->graph(GraphRole::Backward);
  REQUIRE(inf);
  REQUIRE(fwd);
  REQUIRE(bwd);
  CHECK(p->graph(GraphRole::Joint) == nullptr);
  REQUIRE(inf->nodes.size() == 2);
  CHECK(inf->nodes[0].debug.fx_name == "mul");
  REQUIRE(inf->nodes[0].args.size() == 2);
  CHECK(std::get<TensorRef>(inf->nodes[0].args[0].value).value == 3);
  CHECK(inf->nodes[0].args[1].name == "other");
  CHECK(inf->values[3].meta->sizes.size() == 2);
  CHECK(inf->values[3].meta->sizes[1].value == 3);
  CHECK(inf->values[3].meta->device == c10::Device(c10::kCPU));
  const Argument& thr = bwd->nodes[0].args[2];
  CHECK(std::get<c10::Scalar>(thr.value).toLong() == 0);
  CHECK(fwd->outputs.size() == 3);
  REQUIRE(p->examples.size() == 1);
  CHECK(p->examples[0].references.has_value());
  CHECK(p->examples[0].inputs[0].data.size() == 24);
}

TEST_CASE("program: descriptors print in AOTAutograd's spelling", "[loader][program]") {
  auto p = decode(*make_program());
  const Graph& inf = *p->graph(GraphRole::Inference);
  const Graph& bwd = *p->graph(GraphRole::Backward);
  const Graph& fwd = *p->graph(GraphRole::Forward);
  CHECK(inf.inputs[0].descriptor.to_string() == "ParamAOTInput(target='w')");
  CHECK(inf.inputs[2].descriptor.to_string() == "BufferAOTInput(target='count')");
  CHECK(inf.inputs[3].descriptor.to_string() == "PlainAOTInput(idx=0)");
  CHECK(inf.outputs[0].descriptor.to_string() == "PlainAOTOutput(idx=0)");
  CHECK(fwd.outputs[1].descriptor.to_string() == "SavedForBackwardsAOTOutput(idx=0)");
  CHECK(bwd.inputs[1].descriptor.to_string() == "SavedForBackwardsAOTInput(idx=1)");
  CHECK(bwd.inputs[2].descriptor.to_string() == "TangentAOTInput(output=PlainAOTOutput(idx=0))");
  CHECK(bwd.outputs[0].descriptor.to_string() == "GradAOTOutput(grad_of=ParamAOTInput(target='w'))");
  CHECK(*bwd.outputs[0].descriptor.of == inf.inputs[0].descriptor);
  CHECK_FALSE(inf.inputs[0].descriptor == inf.inputs[1].descriptor);
  CHECK(std::string(to_string(InputKind::Tangent)) == "Tangent");
  CHECK(std::string(to_string(OutputKind::InputMutation)) == "InputMutation");
  CHECK(std::string(to_string(GraphRole::Backward)) == "backward");
  CHECK(std::string(to_string(WeightKind::Buffer)) == "buffer");

  InputDescriptor sub;
  sub.kind = InputKind::SubclassGetAttr;
  sub.attr = "a";
  sub.base = std::make_shared<InputDescriptor>(inf.inputs[3].descriptor);
  CHECK(sub.to_string() == "SubclassGetAttrAOTInput(base=PlainAOTInput(idx=0), attr='a')");
  OutputDescriptor mut;
  mut.kind = OutputKind::InputMutation;
  mut.of = std::make_shared<InputDescriptor>(inf.inputs[2].descriptor);
  CHECK(mut.to_string() == "InputMutationAOTOutput(mutated_input=BufferAOTInput(target='count'))");
}

TEST_CASE("program: a newer schema minor is accepted", "[loader][program]") {
  auto p = make_program();
  p->schema_version->minor = 7;
  CHECK(decode(*p)->schema_minor == 7);
}

TEST_CASE("program: read_program reads program.fb from an archive", "[loader][program]") {
  const std::vector<uint8_t> bytes = fixture_archive();
  Archive a = Archive::from_bytes(bytes.data(), bytes.size());
  CHECK(read_program(a)->weights.size() == 3);
}

TEST_CASE("bad input: program.fb compressed", "[loader][bad-input]") {
  std::vector<RawEntry> entries = fixture_entries(*make_program());
  entries[2].deflate = true;
  const std::vector<uint8_t> bytes = build_raw_zip(entries);
  Archive a = Archive::from_bytes(bytes.data(), bytes.size());
  CHECK_THROWS_WITH(read_program(a), Contains("'program.fb' is compressed"));
}

TEST_CASE("bad input: Verifier failure (garbage program.fb)", "[loader][bad-input]") {
  std::vector<uint8_t> garbage(256);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>(i * 37 + 11);
  std::memcpy(garbage.data() + 4, "PT2R", 4);
  CHECK_THROWS_WITH(decode_program(garbage.data(), garbage.size()),
                    Contains("program.fb") && Contains("FlatBuffers verification failed"));
  std::memcpy(garbage.data() + 4, "ABCD", 4);
  CHECK_THROWS_WITH(decode_program(garbage.data(), garbage.size()),
                    Contains("file identifier is 'ABCD', expected 'PT2R'"));
  CHECK_THROWS_WITH(decode_program(garbage.data(), 4), Contains("too small"));
}

TEST_CASE("bad input: truncated program.fb at many offsets", "[loader][bad-input]") {
  const std::vector<uint8_t> full = pack(*make_program());
  REQUIRE_NOTHROW(decode_program(full.data(), full.size()));
  for (size_t cut = 0; cut < full.size(); cut += std::max<size_t>(1, full.size() / 64)) {
    INFO("program.fb truncated to " << cut << " of " << full.size() << " bytes");
    std::vector<uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(cut));
    CHECK_THROWS_AS(decode_program(prefix.data(), prefix.size()), FormatError);
  }
  // Also inside an archive, through the whole load path.
  std::vector<RawEntry> entries = fixture_entries(*make_program());
  entries[2].bytes.resize(entries[2].bytes.size() / 2);
  CHECK_THROWS_AS(load_all(build_aligned(entries)), FormatError);
}

TEST_CASE("bad input: future schema major version", "[loader][bad-input]") {
  auto p = make_program();
  p->schema_version->major = 2;
  p->schema_version->minor = 3;
  CHECK_THROWS_WITH(decode(*p), Contains("schema version 2.3 is newer than this reader's schema version 1." +
                                         std::to_string(kSchemaMinor)));
}

// One row per corruption: the test name, the mutation of the valid fixture, and what the
// FormatError message must say. Each row is registered as its own Catch2 test case (and so
// its own ctest test), like gguf's table of corruption cases.
namespace {

struct BadProgram {
  const char* name;
  std::function<void(fbs::ProgramT&)> mutate;
  std::vector<const char*> message;
};

const std::vector<BadProgram>& bad_programs() {
  using IK = fbs::InputKind;
  using OK = fbs::OutputKind;
  static const std::vector<BadProgram> cases = {
      {"bad input: bad value id",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).nodes[0]->args[0]->value.AsTensorRef()->value = 99; },
       {"graph 'inference': node 0 'mul' (aten::mul.Tensor): argument 'self' refers to value 99, but the graph has 6 values"}},
      {"bad input: use before def",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).nodes[0]->args[1]->value.AsTensorRef()->value = 5; },
       {"node 0 'mul'", "uses value 5 'relu' before it is defined"}},
      {"bad input: value defined twice",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Forward).nodes[1]->outputs[0] = 3; },
       {"graph 'forward': node 1 'relu'", "defines value 3 'x', which is already defined"}},
      {"bad input: output value out of range",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).outputs[0]->value = 6; },
       {"output 0 refers to value 6"}},
      {"bad input: bad op index",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Backward).nodes[1]->op = 9; },
       {"graph 'backward': node 1 'mul_1' uses operator 9, but there are 3 operators"}},
      {"bad input: argument of the wrong value kind",
       [](fbs::ProgramT& p) {
         fbs::SymIntRefT r;
         r.value = 3;
         graph(p, fbs::GraphRole::Inference).nodes[0]->args[0]->value.Set(r);
       },
       {"argument 'self' refers to value 3 'x' of kind Tensor, expected SymInt"}},
      {"bad input: argument without a value",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).nodes[1]->args[0]->value.Reset(); },
       {"node 1 'relu'", "argument 'self' has no value"}},
      {"bad input: unknown dtype",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).values[3]->meta->dtype = static_cast<fbs::ScalarType>(99); },
       {"unknown dtype (ScalarType 99)"}},
      {"bad input: unknown descriptor kind",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).inputs[1]->descriptor->kind = IK::Unknown; },
       {"graph 'inference': input 1 has descriptor kind Unknown (0)"}},
      {"bad input: out-of-range descriptor kind",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Forward).outputs[0]->descriptor->kind = static_cast<OK>(200); },
       {"unknown output descriptor kind 200"}},
      {"bad input: Grad(of) naming a frozen param",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Backward).outputs[0]->descriptor->of->fqn = "frozen"; },
       {"GradAOTOutput(grad_of=ParamAOTInput(target='frozen'))", "frozen parameter 'frozen' (requires_grad=False)"}},
      {"bad input: Grad(of) naming a buffer",
       [](fbs::ProgramT& p) {
         auto& of = graph(p, fbs::GraphRole::Backward).outputs[0]->descriptor->of;
         of->kind = IK::Buffer;
         of->fqn = "count";
       },
       {"does not name a trainable input"}},
      {"bad input: Grad output in the forward graph",
       [](fbs::ProgramT& p) {
         auto& d = graph(p, fbs::GraphRole::Forward).outputs[0]->descriptor;
         d->kind = OK::Grad;
         d->of = std::make_unique<fbs::InputDescriptorT>();
         d->of->kind = IK::Param;
         d->of->fqn = "w";
       },
       {"graph 'forward': output 0 GradAOTOutput", "is not allowed in this graph"}},
      {"bad input: descriptor target missing",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).inputs[0]->descriptor->fqn = "fc.weight"; },
       {"ParamAOTInput(target='fc.weight') names no parameter of the program"}},
      {"bad input: repeated descriptor",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).inputs[1]->descriptor->fqn = "w"; },
       {"input 1 repeats descriptor ParamAOTInput(target='w')"}},
      {"bad input: Plain inputs not 0..n-1",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).inputs[3]->descriptor->idx = 1; },
       {"PlainAOTInput indices must be 0..n-1 (n = 1), each once; found [1]"}},
      {"bad input: Tangent without output",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Backward).inputs[2]->descriptor->output.reset(); },
       {"TangentAOTInput(output=None) does not say which output it belongs to"}},
      {"bad input: Tangent of an unknown output",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Backward).inputs[2]->descriptor->output->idx = 4; },
       {"TangentAOTInput(output=PlainAOTOutput(idx=4)) is the tangent of no output of graph 'forward'"}},
      {"bad input: Saved(k) without a forward counterpart",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Backward).inputs[1]->descriptor->idx = 5; },
       {"SavedForBackwardsAOTInput(idx=5) has no SavedForBackwardsAOTOutput(idx=5) in graph 'forward'"}},
      {"bad input: forward Saved output missing in backward",
       [](fbs::ProgramT& p) {
         auto& fwd = graph(p, fbs::GraphRole::Forward);
         auto extra = std::make_unique<fbs::GraphOutputT>(*fwd.outputs[1]);
         extra->descriptor->idx = 2;
         fwd.outputs.push_back(std::move(extra));
       },
       {"takes 2 saved values, graph 'forward' saves 3"}},
      {"bad input: forward without backward",
       [](fbs::ProgramT& p) { p.graphs.pop_back(); },
       {"graph 'forward' has no matching 'backward' graph"}},
      {"bad input: duplicate graph role",
       [](fbs::ProgramT& p) { p.graphs.push_back(std::make_unique<fbs::GraphT>(*p.graphs[0])); },
       {"graph 'inference' appears more than once"}},
      {"bad input: InputMutation of a non-input",
       [](fbs::ProgramT& p) {
         auto& d = graph(p, fbs::GraphRole::Forward).outputs[1]->descriptor;
         d->kind = OK::InputMutation;
         d->of = std::make_unique<fbs::InputDescriptorT>();
         d->of->kind = IK::Buffer;
         d->of->fqn = "count";
         graph(p, fbs::GraphRole::Forward).inputs.erase(graph(p, fbs::GraphRole::Forward).inputs.begin() + 2);
       },
       {"InputMutationAOTOutput(mutated_input=BufferAOTInput(target='count')) names no input of this graph"}},
      {"bad input: overflowing sizes",
       [](fbs::ProgramT& p) {
         p.weights[0]->sizes = {int64_t{1} << 62, 8};
         p.weights[0]->strides = {8, 1};
       },
       {"weight 0 'w'", "sizes [4611686018427387904, 8]", "overflow"}},
      {"bad input: overflowing numel with zero strides",
       [](fbs::ProgramT& p) {
         p.weights[0]->sizes = {int64_t{1} << 40, int64_t{1} << 40};
         p.weights[0]->strides = {0, 0};
       },
       {"weight 0 'w'", "overflow"}},
      {"bad input: negative size",
       [](fbs::ProgramT& p) { p.weights[0]->sizes = {-1, 3}; },
       {"weight 0 'w'", "negative size in sizes [-1, 3]"}},
      {"bad input: negative stride",
       [](fbs::ProgramT& p) { p.weights[0]->strides = {3, -1}; },
       {"negative stride in strides [3, -1]"}},
      {"bad input: byte_length disagrees with dtype x numel",
       [](fbs::ProgramT& p) { p.weights[0]->byte_length = 20; },
       {"weight 0 'w'", "byte_length 20 != 4 (Float) x 6 storage elements = 24"}},
      {"bad input: duplicate weight entry",
       [](fbs::ProgramT& p) { p.weights[1]->entry = "weights/0"; },
       {"entry 'weights/0' is used by two weights"}},
      {"bad input: weight entry outside weights/",
       [](fbs::ProgramT& p) { p.weights[1]->entry = "program.fb"; },
       {"entry 'program.fb' is not under 'weights/'"}},
      {"bad input: requires_grad on an integer weight",
       [](fbs::ProgramT& p) { p.weights[2]->requires_grad = true; },
       {"requires_grad on non-floating dtype Long"}},
      {"bad input: example data of the wrong size",
       [](fbs::ProgramT& p) { p.examples[0]->inputs[0]->data.pop_back(); },
       {"example 0 'default' input 0: holds 23 bytes, Float[2, 3] needs 24"}},
      {"bad input: gradient sketch with too many projections (verify's cost)",
       [](fbs::ProgramT& p) {
         auto s = std::make_unique<fbs::GradSketchT>();
         s->name = "w";
         s->dtype = fbs::ScalarType::Float;
         s->sizes = {2, 3};
         s->projections.assign(65, 0.0);
         p.examples[0]->references->grad_sketches.push_back(std::move(s));
       },
       {"gradient sketch 'w': 65 projections, at most 64"}},
      {"bad input: gradient sketch of 2^32 elements",
       [](fbs::ProgramT& p) {
         auto s = std::make_unique<fbs::GradSketchT>();
         s->name = "w";
         s->sizes = {65536, 65536};
         p.examples[0]->references->grad_sketches.push_back(std::move(s));
       },
       {"gradient sketch 'w': sizes [65536, 65536]", "reach 2^32 elements"}},
      {"bad input: bad device",
       [](fbs::ProgramT& p) { graph(p, fbs::GraphRole::Inference).values[0]->meta->device->type = "toaster"; },
       {"invalid device 'toaster'"}},
  };
  return cases;
}

void run_bad_program(const BadProgram& c) {
  auto p = make_program();
  c.mutate(*p);
  const std::vector<uint8_t> bytes = pack(*p);
  try {
    decode_program(bytes.data(), bytes.size());
    FAIL("no FormatError for: " << c.name);
  } catch (const FormatError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.rfind("pt2rt::FormatError: program.fb: ", 0) == 0);
    for (const char* m : c.message) CHECK_THAT(what, Contains(m));
  }
}

// One test case per row, registered at static-initialization time.
const bool registered = [] {
  for (size_t i = 0; i < bad_programs().size(); ++i) {
    register_test_case(bad_programs()[i].name, "[loader][bad-input]",
                       [](size_t row) { run_bad_program(bad_programs()[row]); }, i);
  }
  return true;
}();

}  // namespace
