// pt2rt/training_state.h through the C++ API: 2 optimizer steps, save_training_state, a new
// Model and optimizer from the saved archive, load + restore, 2 more steps — the same
// parameters, buffers and optimizer state, bit for bit, as 4 uninterrupted steps (SGD with
// Nesterov momentum, Adam with amsgrad; cnn_bn: BatchNorm running stats). Refusals: another
// hyper-parameter, another optimizer; Model::save drops a stale state.
#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>

#include "catch_compat.h"
#include "fixtures.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"
#include "pt2rt/training_state.h"

using namespace pt2rt;
using namespace pt2rt::test;
namespace fs = std::filesystem;

namespace {

using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(const Model&)>;

std::vector<at::Tensor> trainable(const Model& m) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : m.parameters()) {
    if (p.requires_grad()) out.push_back(p);
  }
  return out;
}

/// Steps [first, last) of the reference batches: sum of squares of the floating outputs.
void run_steps(Model& m, torch::optim::Optimizer& opt, size_t first, size_t last) {
  const Record ref = load_record("cnn_bn_train.pt");
  const auto& batches = ref.at("batches").toTupleRef().elements();
  m.train();
  for (size_t step = first; step < last; ++step) {
    opt.zero_grad();
    at::Tensor loss;
    for (const at::Tensor& o : m.forward(to_tensors(batches[step % batches.size()]))) {
      if (o.is_floating_point()) loss = loss.defined() ? loss + o.pow(2).mean() : o.pow(2).mean();
    }
    loss.backward();
    opt.step();
  }
}

void check_resume(const MakeOptimizer& make, const fs::path& dir) {
  const std::string path = archive_path("cnn_bn", partitioners().front());
  Model full = Model::load(path);
  auto full_opt = make(full);
  run_steps(full, *full_opt, 0, 4);

  Model first = Model::load(path);
  auto first_opt = make(first);
  run_steps(first, *first_opt, 0, 2);
  TrainingState state = capture_optimizer_state(first, *first_opt);
  state.steps = 2;
  state.settings = {{"note", "two steps"}};
  const std::string saved = (dir / "two_steps.pt2").string();
  save_training_state(first, state, saved);

  Model second = Model::load(saved);
  const std::optional<TrainingState> loaded = load_training_state(second);
  REQUIRE(loaded);
  CHECK(loaded->steps == 2);
  CHECK(*loaded->setting("note") == "two steps");
  CHECK(loaded->params.size() == trainable(second).size());
  auto second_opt = make(second);
  restore_optimizer_state(*loaded, second, *second_opt);
  run_steps(second, *second_opt, 2, 4);

  const auto want = full.named_parameters(), got = second.named_parameters();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(want[i].first);
    CHECK(at::equal(got[i].second, want[i].second));
  }
  const auto want_b = full.named_buffers(), got_b = second.named_buffers();
  for (size_t i = 0; i < got_b.size(); ++i) {
    INFO(want_b[i].first);
    CHECK(at::equal(got_b[i].second, want_b[i].second));
  }
  const TrainingState a = capture_optimizer_state(full, *full_opt);
  const TrainingState b = capture_optimizer_state(second, *second_opt);
  REQUIRE(a.params.size() == b.params.size());
  for (size_t i = 0; i < a.params.size(); ++i) {
    CHECK(a.params[i].step == b.params[i].step);
    REQUIRE(a.params[i].tensors.size() == b.params[i].tensors.size());
    for (size_t k = 0; k < a.params[i].tensors.size(); ++k) {
      CHECK(at::equal(a.params[i].tensors[k].second, b.params[i].tensors[k].second));
    }
  }
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("pt2rt-state-" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(path); }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("training state: 2 steps + save + load + restore + 2 steps == 4 steps", "[training]") {
  TempDir dir;
  SECTION("sgd, nesterov momentum") {
    check_resume(
        [](const Model& m) {
          return std::make_unique<torch::optim::SGD>(
              trainable(m), torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
        },
        dir.path);
  }
  SECTION("adam, amsgrad") {
    check_resume(
        [](const Model& m) {
          return std::make_unique<torch::optim::Adam>(
              trainable(m), torch::optim::AdamOptions(0.01).amsgrad(true).weight_decay(1e-3));
        },
        dir.path);
  }
}

TEST_CASE("training state: other hyper-parameters or optimizer refused; save drops it",
          "[training][errors]") {
  TempDir dir;
  const std::string path = archive_path("cnn_bn", partitioners().front());
  Model m = Model::load(path);
  torch::optim::SGD opt(trainable(m), torch::optim::SGDOptions(0.05).momentum(0.9));
  run_steps(m, opt, 0, 1);
  const std::string saved = (dir.path / "s.pt2").string();
  save_training_state(m, capture_optimizer_state(m, opt), saved);
  Model again = Model::load(saved);
  const auto state = load_training_state(again);
  REQUIRE(state);
  torch::optim::SGD other(trainable(again), torch::optim::SGDOptions(0.05).momentum(0.5));
  CHECK_THROWS_WITH(restore_optimizer_state(*state, again, other),
                    Contains("sgd momentum was 0.90000000000000002, the optimizer has 0.5"));
  torch::optim::Adam adam(trainable(again), torch::optim::AdamOptions(0.05));
  CHECK_THROWS_AS(restore_optimizer_state(*state, again, adam), InputError);
  const std::string plain = (dir.path / "plain.pt2").string();
  again.save(plain);  // new weights: the stored state no longer belongs to them
  CHECK_FALSE(load_training_state(Model::load(plain)));
}
