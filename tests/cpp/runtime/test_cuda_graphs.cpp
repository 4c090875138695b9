// LoadOptions::cuda_graphs (runtime/exec/cuda_graphs.h): on CUDA, inference calls replayed
// from CUDA graphs give exactly the outputs of the same calls without graphs (the same
// kernels), also after the weights change in place and across calls whose results the caller
// keeps; elsewhere the option is ignored, and a build without CUDA refuses to make graphs.
#include "catch_compat.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>

#include "exec/cuda_graphs.h"
#include "fixtures.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"

namespace pt2rt {
using test::Contains;

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
  CHECK_THROWS_AS(make_cuda_graphs(c10::kCPU, 4), InputError);
  if (!cuda_graphs_available()) {
    CHECK_THROWS_WITH(make_cuda_graphs(c10::Device(c10::kCUDA, 0), 4),
                      Contains("built against a LibTorch without CUDA"));
  }
}

TEST_CASE("cuda_graphs: replayed inference equals plain inference, bit for bit",
          "[cuda_graphs][cuda]") {
  if (!at::hasCUDA()) {
    WARN("no CUDA device: CUDA graph replays not exercised here");
    return;
  }
  const c10::Device cuda(c10::kCUDA, 0);
  for (const std::string name : {"mlp", "cnn_bn", "resnet18", "attention", "lstm", "gru",
                                 "upsample", "embedding_max_norm", "one_hot", "dict_list_out"}) {
    INFO(name);
    LoadOptions options;
    options.cuda_graphs = true;
    Model graphed = Model::load(test::archive_path(name, "default"), cuda, options);
    Model plain = Model::load(test::archive_path(name, "default"), cuda);
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

}  // namespace pt2rt
