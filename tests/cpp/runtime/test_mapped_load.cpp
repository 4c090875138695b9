// tests/cpp/runtime/test_mapped_load.cpp — Model::load with LoadOptions::map_weights on an
// exported conv+BatchNorm fixture: the weights view the mapped file (no copy), the model
// computes what a read load computes in eval and in training, an optimizer step updates the
// mapped weights privately (the file never changes), and the bundled examples are decoded only
// when asked for (Model::examples()), on either kind of load; LoadOptions::inference_only
// loads run eval mode alike and refuse train().
#include <ATen/ATen.h>
#include "catch_compat.h"
#include <torch/optim/sgd.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "fixtures.h"
#include "pt2rt/archive.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"
#include "pt2rt/weights.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

LoadOptions mapped() {
  LoadOptions o;
  o.map_weights = true;
  return o;
}

/// One SGD step on the references' loss; returns the parameters' gradients.
std::vector<at::Tensor> sgd_step(Model& m, const std::vector<at::Tensor>& x,
                                 const std::vector<at::Tensor>& grad_outputs) {
  m.train();
  torch::optim::SGD opt(m.parameters(), torch::optim::SGDOptions(0.1));
  opt.zero_grad();
  reference_loss(m.forward(x), grad_outputs).backward();
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : m.parameters()) grads.push_back(p.grad().clone());
  opt.step();
  return grads;
}

}  // namespace

TEST_CASE("a mapped load computes what a read load does and never writes the file",
          "[mapped][parity]") {
  const std::string path = archive_path("cnn_bn", "default");
  const std::vector<char> before = file_bytes(path);
  Model read = Model::load(path);
  Model map = Model::load(path, c10::kCPU, mapped());

  const std::vector<Example> examples = map.examples();
  REQUIRE_FALSE(examples.empty());
  REQUIRE(examples[0].references.has_value());
  CHECK(read.program().examples.empty());  // not decoded at load, either way
  CHECK(map.program().examples.empty());
  CHECK(read.examples().size() == examples.size());

  const Record ref = load_record("cnn_bn_ref.pt");
  const std::vector<at::Tensor> x = to_tensors(ref.at("inputs"));
  const std::vector<at::Tensor> go = to_tensors(ref.at("grad_outputs"));
  CHECK(at::equal(read.forward(x)[0], map.forward(x)[0]));

  const std::vector<at::Tensor> g_read = sgd_step(read, x, go);
  const std::vector<at::Tensor> g_map = sgd_step(map, x, go);
  REQUIRE(g_read.size() == g_map.size());
  for (size_t i = 0; i < g_read.size(); ++i) CHECK(at::equal(g_read[i], g_map[i]));
  const auto p_read = read.named_parameters(), p_map = map.named_parameters();
  for (size_t i = 0; i < p_read.size(); ++i) {
    INFO(p_read[i].first);
    CHECK(at::equal(p_read[i].second, p_map[i].second));  // updated in place, privately
  }
  const auto b_read = read.named_buffers(), b_map = map.named_buffers();
  for (size_t i = 0; i < b_read.size(); ++i) CHECK(at::equal(b_read[i].second, b_map[i].second));
  CHECK(file_bytes(path) == before);
  // A fresh mapped load sees the file's weights, not the first model's private updates.
  Model again = Model::load(path, c10::kCPU, mapped());
  Model fresh = Model::load(path);
  CHECK(at::equal(again.parameters()[0], fresh.parameters()[0]));
  CHECK_FALSE(at::equal(again.parameters()[0], map.parameters()[0]));
}

TEST_CASE("an inference-only load runs eval mode like a full load and refuses train()",
          "[mapped][inference_only]") {
  const std::string path = archive_path("cnn_bn", "default");
  Model full = Model::load(path);
  full.eval();
  const std::vector<at::Tensor> x = to_tensors(load_record("cnn_bn_ref.pt").at("inputs"));
  const std::vector<at::Tensor> want = full.forward(x);
  for (bool map_weights : {false, true}) {
    LoadOptions o;
    o.map_weights = map_weights;
    o.inference_only = true;
    Model m = Model::load(path, c10::kCPU, o);
    m.eval();
    const std::vector<at::Tensor> got = m.forward(x);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(at::equal(got[i], want[i]));
    CHECK_THROWS_WITH(m.train(), Contains("inference_only"));
    CHECK_FALSE(m.is_training());
  }

  // Without an inference graph there is nothing to load.
  auto train_only = std::make_shared<Program>(full.program());
  auto& graphs = train_only->graphs;
  graphs.erase(std::remove_if(graphs.begin(), graphs.end(),
                              [](const Graph& g) { return g.role == GraphRole::Inference; }),
               graphs.end());
  const std::vector<at::Tensor> weights =
      load_weights(Archive::open(path), *train_only, c10::kCPU);
  CHECK_NOTHROW(Model::from_program(train_only, weights));
  LoadOptions o;
  o.inference_only = true;
  CHECK_THROWS_AS(Model::from_program(train_only, weights, c10::kCPU, o), InputError);
}

TEST_CASE("a mapped load never runs weights that differ from what was written",
          "[mapped][crc]") {
  // A copy of the fixture with one byte of a weight entry flipped: the zip stays intact (the
  // CRC-32 in its directory no longer matches the bytes).
  const std::string path = archive_path("cnn_bn", "default");
  const Archive archive = Archive::open(path);
  const EntryInfo& w = archive.entry("weights/0");
  std::vector<char> bytes = file_bytes(path);
  bytes[w.data_offset + w.size / 2] ^= 0x40;
  const std::string bad = path + ".flipped.pt2";
  std::ofstream(bad, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const std::vector<at::Tensor> x = to_tensors(load_record("cnn_bn_ref.pt").at("inputs"));

  Model m = Model::load(bad, c10::kCPU, mapped());  // the load itself reads no weight byte
  m.eval();
  for (int call = 0; call < 2; ++call) {  // the first call and every later one
    REQUIRE_THROWS_AS(m.forward(x), FormatError);
    REQUIRE_THROWS_WITH(m.forward(x), Contains("weights/0") && Contains("map_weights"));
  }
  LoadOptions unchecked = mapped();
  unchecked.check_mapped_weights = false;  // the caller accepts the risk: it runs
  Model u = Model::load(bad, c10::kCPU, unchecked);
  u.eval();
  CHECK_NOTHROW(u.forward(x));
  // A read load checks the CRC while reading.
  CHECK_THROWS_AS(Model::load(bad), FormatError);
  std::remove(bad.c_str());
}
