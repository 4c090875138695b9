// LoadOptions::cuda_graphs (runtime/exec/cuda_graphs.h, inference_graphs.h,
// training_graphs.h): on CUDA, inference calls replayed from CUDA graphs give exactly the
// outputs of the same calls without graphs (the same kernels), also after the weights change
// in place and across calls whose results the caller keeps; training steps (forward and
// backward replayed, torch::optim::SGD between) give bit for bit the outputs, gradients,
// parameters and buffers of the same steps without graphs, for every zoo model; two forwards before their backwards and a stale
// retain_graph backward behave as training_graphs.h says. Elsewhere the option is ignored,
// and a build without CUDA refuses to make graphs.
#include "catch_compat.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include <set>

#include "exec/cuda_graphs.h"
#include "exec/training_graphs.h"
#include "fixtures.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"

namespace pt2rt {
using test::Contains;
namespace {

/// The fixture `name` loaded twice on cuda:0: with LoadOptions::cuda_graphs and without.
struct GraphedAndPlain {
  Model graphed, plain;
};

GraphedAndPlain load_both(const std::string& name) {
  const c10::Device cuda(c10::kCUDA, 0);
  LoadOptions options;
  options.cuda_graphs = true;
  return {Model::load(test::archive_path(name, "default"), cuda, options),
          Model::load(test::archive_path(name, "default"), cuda)};
}

}  // namespace

TEST_CASE("cuda_graphs: ignored off CUDA; a CUDA-less build cannot make graphs",
          "[cuda_graphs]") {
  LoadOptions options;
  options.cuda_graphs = true;
  Model with = Model::load(test::archive_path("mlp", "default"), c10::kCPU, options);
  Model without = Model::load(test::archive_path("mlp", "default"), c10::kCPU);
  with.eval();
  without.eval();
  const std::vector<at::Tensor> inputs = without.example_inputs();
  const std::vector<at::Tensor> a = with.forward(inputs), b = without.forward(inputs);
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) CHECK(at::equal(a[i], b[i]));
  with.train();
  without.train();
  const at::Tensor loss_with = with.forward(inputs).at(0).pow(2).mean();
  const at::Tensor loss_without = without.forward(inputs).at(0).pow(2).mean();
  CHECK(at::equal(loss_with, loss_without));
  CHECK(with.cuda_graph_report().empty());
  CHECK_THROWS_AS(make_graph_capturer(c10::kCPU), InputError);
  if (!cuda_graphs_available()) {
    CHECK_THROWS_WITH(make_graph_capturer(c10::Device(c10::kCUDA, 0)),
                      Contains("built against a LibTorch without CUDA"));
  }
}

TEST_CASE("cuda_graphs: replayed inference equals plain inference, bit for bit",
          "[cuda_graphs][cuda]") {
  if (!at::hasCUDA()) {
    WARN("no CUDA device: CUDA graph replays not exercised here");
    return;
  }
  for (const std::string name : {"mlp", "cnn_bn", "resnet18", "attention", "lstm", "gru",
                                 "upsample", "embedding_max_norm", "one_hot", "dict_list_out"}) {
    INFO(name);
    auto [graphed, plain] = load_both(name);
    graphed.eval();
    plain.eval();
    const std::vector<at::Tensor> inputs = plain.example_inputs();
    std::vector<std::vector<at::Tensor>> kept, wanted;  // results must survive later replays
    for (int call = 0; call < kCudaGraphWarmupRuns + 3; ++call) {
      if (call == kCudaGraphWarmupRuns + 2) {  // weights changed in place, as an optimizer does
        for (Model* m : {&graphed, &plain}) {
          for (const at::Tensor& p : m->parameters()) p.detach().mul_(0.5);
        }
      }
      std::vector<at::Tensor> got = graphed.forward(inputs);
      std::vector<at::Tensor> want = plain.forward(inputs);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("call " << call << ", output " << i);
        CHECK(at::equal(got[i], want[i]));
      }
      kept.push_back(std::move(got));
      wanted.push_back(std::move(want));
    }
    torch::cuda::synchronize();
    WARN(name << ": " << graphed.cuda_graph_report());
    // Every result handed out still holds its own call's values (the weights changed before
    // the last call, so a result aliasing the graph's static outputs would show it).
    for (size_t c = 0; c < kept.size(); ++c) {
      for (size_t i = 0; i < kept[c].size(); ++i) {
        INFO("kept result of call " << c << ", output " << i);
        CHECK(at::equal(kept[c][i], wanted[c][i]));
      }
    }
  }
}

namespace {

/// The benchmark's loss: the sum over floating outputs of out.pow(2).mean().
at::Tensor square_loss(const std::vector<at::Tensor>& outputs) {
  at::Tensor loss;
  for (const at::Tensor& o : outputs) {
    if (!o.defined() || !o.is_floating_point() || !o.requires_grad()) continue;
    at::Tensor term = o.pow(2).mean();
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

void clear_grads(Model& m) {
  for (const at::Tensor& p : m.parameters()) p.mutable_grad() = at::Tensor();
}

/// Equal bit for bit (undefined alike).
bool same(const at::Tensor& got, const at::Tensor& want) {
  if (!got.defined() || !want.defined()) return got.defined() == want.defined();
  return at::equal(got, want);
}

/// Deterministic algorithms for the scope: cuDNN's default convolution backward and
/// memory-efficient attention's backward (pt2rt::scaled_dot_product_attention) accumulate with
/// atomics, so two runs of the same step differ in the last bits — graphs or not
/// (torch.backends.cudnn.deterministic; torch.use_deterministic_algorithms(True,
/// warn_only=True), which ops without a deterministic kernel only warn about).
struct DeterministicCuDNN {
  const bool before = at::globalContext().deterministicCuDNN();
  const bool before_algorithms = at::globalContext().deterministicAlgorithms();
  const bool before_warn_only = at::globalContext().deterministicAlgorithmsWarnOnly();
  DeterministicCuDNN() {
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  }
  ~DeterministicCuDNN() {
    at::globalContext().setDeterministicCuDNN(before);
    at::globalContext().setDeterministicAlgorithms(before_algorithms, before_warn_only);
  }
};

}  // namespace

TEST_CASE("cuda_graphs: replayed training steps equal plain training steps",
          "[cuda_graphs][cuda]") {
  if (!at::hasCUDA()) {
    WARN("no CUDA device: CUDA graph replays of training steps not exercised here");
    return;
  }
  // Captured on every machine: the zoo's plain CNN, BatchNorm, residual and attention models.
  const std::set<std::string> must_capture = {"mlp", "cnn_bn", "resnet18", "attention",
                                              "mobilenet_v2", "two_io", "frozen"};
  DeterministicCuDNN deterministic;
  int compared = 0;
  for (const std::string& name : test::fixture_models()) {
    INFO(name);
    auto [graphed, plain] = load_both(name);
    if (!plain.program().graph(GraphRole::Backward)) continue;
    graphed.train();
    plain.train();
    torch::optim::SGD opt_g(graphed.parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    torch::optim::SGD opt_p(plain.parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    const std::vector<at::Tensor> inputs = plain.example_inputs();
    for (int step = 0; step < kCudaGraphWarmupRuns + 4; ++step) {
      INFO("step " << step);
      clear_grads(graphed);  // zero_grad(set_to_none=True)
      clear_grads(plain);
      const std::vector<at::Tensor> out_g = graphed.forward(inputs);
      const std::vector<at::Tensor> out_p = plain.forward(inputs);
      REQUIRE(out_g.size() == out_p.size());
      for (size_t i = 0; i < out_g.size(); ++i) {
        INFO("output " << i);
        CHECK(same(out_g[i], out_p[i]));
      }
      const at::Tensor loss_g = square_loss(out_g), loss_p = square_loss(out_p);
      if (!loss_p.defined()) break;
      loss_g.backward();
      loss_p.backward();
      const std::vector<at::Tensor> pg = graphed.parameters(), pp = plain.parameters();
      for (size_t k = 0; k < pp.size(); ++k) {
        INFO("gradient of parameter " << k);
        CHECK(same(pg[k].grad(), pp[k].grad()));
      }
      opt_g.step();
      opt_p.step();
      const NamedTensors bg = graphed.named_buffers(), bp = plain.named_buffers();
      for (size_t k = 0; k < bp.size(); ++k) {
        INFO("buffer " << bp[k].first);
        CHECK(same(bg[k].second, bp[k].second));
      }
    }
    const std::vector<at::Tensor> pg = graphed.parameters(), pp = plain.parameters();
    for (size_t k = 0; k < pp.size(); ++k) {
      INFO("parameter " << k << " after the steps");
      CHECK(same(pg[k], pp[k]));
    }
    torch::cuda::synchronize();
    const std::string report = graphed.cuda_graph_report();
    WARN(name << ": " << report);
    ++compared;
    if (must_capture.count(name)) {
      CHECK_THAT(report, Contains("forward captured"));
      CHECK_THAT(report, Contains(": captured"));
    }
  }
  CHECK(compared >= 5);
}

TEST_CASE("cuda_graphs: two forwards before their backwards; a stale backward is refused",
          "[cuda_graphs][cuda]") {
  if (!at::hasCUDA()) {
    WARN("no CUDA device: not exercised here");
    return;
  }
  auto [graphed, plain] = load_both("mlp");
  graphed.train();
  plain.train();
  const at::Tensor x = plain.example_inputs().at(0);
  const at::Tensor x2 = x * 0.5;
  for (int i = 0; i <= kCudaGraphWarmupRuns; ++i) {  // warm-ups, then the capture
    square_loss(graphed.forward({x})).backward();
  }
  // Gradient accumulation over two micro-batches, one backward.
  for (Model* m : {&graphed, &plain}) {
    clear_grads(*m);
    const at::Tensor a = square_loss(m->forward({x}));
    const at::Tensor b = square_loss(m->forward({x2}));
    (a + b).backward();
  }
  const std::vector<at::Tensor> pg = graphed.parameters(), pp = plain.parameters();
  for (size_t k = 0; k < pp.size(); ++k) {
    INFO("gradient of parameter " << k);
    CHECK(at::allclose(pg[k].grad(), pp[k].grad(), 1e-5, 1e-6));
  }
  // retain_graph: a second backward after a later forward replay would read overwritten
  // saved activations.
  const at::Tensor first = square_loss(graphed.forward({x}));
  first.backward({}, /*retain_graph=*/true);
  square_loss(graphed.forward({x2})).backward();
  CHECK_THROWS_WITH(first.backward(), Contains("a later forward replay overwrote"));
  WARN(graphed.cuda_graph_report());
}

}  // namespace pt2rt
