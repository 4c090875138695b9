// Training parity: 10 SGD steps (momentum 0.9) with torch::optim on a loaded Model against
// the same 10 steps in eager PyTorch from the same initial weights on the same batches.
// Every step's loss within rtol 1e-4; final parameters and buffers within 1e-4.
#include <ATen/ATen.h>
#include "catch_compat.h"
#include <torch/optim/sgd.h>

#include <cmath>

#include "assert_close.h"
#include "fixtures.h"
#include "pt2rt/model.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

at::Tensor training_loss(const std::vector<at::Tensor>& outs) {
  at::Tensor loss;
  for (const at::Tensor& o : outs) {
    if (!o.is_floating_point()) continue;
    at::Tensor term = o.pow(2).mean();
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

void check_training(const std::string& name, const std::string& partitioner) {
  INFO(name << " / " << partitioner);
  use_reference_threads(name);
  Record ref = load_record(name + "_train.pt");
  Model m = Model::load(archive_path(name, partitioner));
  m.train();
  torch::optim::SGD opt(m.parameters(), torch::optim::SGDOptions(ref.at("lr").toDouble())
                                            .momentum(ref.at("momentum").toDouble()));
  std::vector<double> losses = to_doubles(ref.at("losses"));
  const auto& batches = ref.at("batches").toTupleRef().elements();
  REQUIRE(batches.size() == losses.size());
  for (size_t step = 0; step < batches.size(); ++step) {
    opt.zero_grad();
    at::Tensor loss = training_loss(m.forward(to_tensors(batches[step])));
    loss.backward();
    opt.step();
    double got = loss.item<double>(), want = losses[step];
    INFO("step " << step << ": loss " << got << " vs eager " << want);
    CHECK(std::abs(got - want) <= 1e-4 * std::abs(want));
  }
  auto check_named = [](const NamedTensors& got, const NamedTensors& want, const char* what) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(what << " " << want[i].first);
      CHECK(got[i].first == want[i].first);
      Closeness c = assert_close(got[i].second, want[i].second, 1e-4, 1e-4);
      CHECK(c.message == "");
    }
  };
  check_named(m.named_parameters(), to_named(ref.at("final_params")), "parameter");
  check_named(m.named_buffers(), to_named(ref.at("final_buffers")), "buffer");
}

}  // namespace

TEST_CASE("10 SGD steps in C++ match 10 eager steps (losses and final weights)", "[training]") {
  for (const std::string& name : fixture_models()) {
    for (const std::string& partitioner : partitioners()) check_training(name, partitioner);
  }
}
