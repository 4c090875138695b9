// Model::save: round trip after fine-tuning, example references dropped, atomicity.
#include <ATen/ATen.h>
#include "catch_compat.h"
#include <torch/optim/sgd.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "fixtures.h"
#include "model/model_impl.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"

using namespace pt2rt;
using namespace pt2rt::test;
namespace fs = std::filesystem;

namespace {

/// A fresh temp directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("pt2rt-save-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

std::vector<char> file_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

void train_steps(Model& m, const std::vector<at::Tensor>& inputs, int steps) {
  m.train();
  torch::optim::SGD opt(m.parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    at::Tensor loss;
    for (const at::Tensor& o : m.forward(inputs)) {
      if (o.is_floating_point()) loss = loss.defined() ? loss + o.pow(2).mean() : o.pow(2).mean();
    }
    loss.backward();
    opt.step();
  }
}

}  // namespace

TEST_CASE("save round trip: load, 3 training steps, save, load gives equal weights", "[save]") {
  for (const std::string name : {"cnn_bn", "frozen", "two_io"}) {
    INFO(name);
    TempDir dir;
    Model m = Model::load(archive_path(name, "default"));
    std::vector<at::Tensor> inputs = to_tensors(load_record(name + "_ref.pt").at("inputs"));
    auto before = m.named_parameters().back().second.detach().clone();
    train_steps(m, inputs, 3);
    REQUIRE_FALSE(m.named_parameters().back().second.equal(before));  // training changed weights

    const fs::path out = dir.path / "tuned.pt2";
    m.save(out.string());
    Model loaded = Model::load(out.string());
    auto p1 = m.named_parameters(), p2 = loaded.named_parameters();
    auto b1 = m.named_buffers(), b2 = loaded.named_buffers();
    REQUIRE(p1.size() == p2.size());
    REQUIRE(b1.size() == b2.size());
    for (size_t i = 0; i < p1.size(); ++i) {
      CHECK(p1[i].first == p2[i].first);
      CHECK(p1[i].second.equal(p2[i].second));
      CHECK(p1[i].second.requires_grad() == p2[i].second.requires_grad());
    }
    for (size_t i = 0; i < b1.size(); ++i) {
      CHECK(b1[i].first == b2[i].first);
      CHECK(b1[i].second.equal(b2[i].second));
    }
    // Bundled example inputs stay; their references (old weights) are gone.
    const std::vector<Example> saved_examples = loaded.examples();
    REQUIRE_FALSE(saved_examples.empty());
    CHECK_FALSE(saved_examples[0].inputs.empty());
    CHECK_FALSE(saved_examples[0].references.has_value());
    CHECK(m.examples()[0].references.has_value());
    // The saved model computes what the tuned one does.
    m.eval();
    loaded.eval();
    CHECK(m.forward(inputs)[0].equal(loaded.forward(inputs)[0]));
  }
}

TEST_CASE("saving over the source archive works and can be repeated", "[save]") {
  TempDir dir;
  const fs::path path = dir.path / "model.pt2";
  fs::copy_file(archive_path("mlp", "min_cut"), path);
  Model m = Model::load(path.string());
  std::vector<at::Tensor> inputs = to_tensors(load_record("mlp_ref.pt").at("inputs"));
  train_steps(m, inputs, 1);
  m.save(path.string());
  train_steps(m, inputs, 1);
  m.save(path.string());  // the source file was replaced; the model still reads its old one
  Model loaded = Model::load(path.string());
  CHECK(loaded.parameters()[0].equal(m.parameters()[0]));
}

TEST_CASE("a save failing halfway leaves the target intact and no temp file", "[save][errors]") {
  TempDir dir;
  const fs::path target = dir.path / "model.pt2";
  fs::copy_file(archive_path("cnn_bn", "default"), target);
  const std::vector<char> original = file_bytes(target);
  Model m = Model::load(archive_path("cnn_bn", "default"));
  train_steps(m, to_tensors(load_record("cnn_bn_ref.pt").at("inputs")), 1);
  WriteOptions fail;
  fail.fail_after_bytes = 4096;
  CHECK_THROWS_AS(save_model(model_state(m), target.string(), fail), Error);
  CHECK(file_bytes(target) == original);
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    (void)e;
    ++entries;
  }
  CHECK(entries == 1);  // only model.pt2: no stray temp file
}

TEST_CASE("a model built from a program has no archive to save into", "[save][errors]") {
  Model m = Model::load(archive_path("mlp", "default"));
  auto program = std::make_shared<Program>(m.program());
  std::vector<at::Tensor> weights;
  for (auto& [n, p] : m.named_parameters()) weights.push_back(p);
  Model copy = Model::from_program(program, weights);
  CHECK_THROWS_WITH(copy.save("/tmp/never.pt2"), pt2rt::test::Contains("no source archive"));
}
