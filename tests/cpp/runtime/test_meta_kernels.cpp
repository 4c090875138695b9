// tests/cpp/runtime/test_meta_kernels.cpp — the load's meta-device check (runtime/model/meta_check.h)
// must not depend on which Meta kernels the process happens to have. Importing Python torch
// registers Python ones for ops LibTorch has none for (torch._decomp's `native_batch_norm`, on
// the Meta key through torch.library), and those answer an eval-mode batch norm's saved
// statistics with [C] where LibTorch's CPU kernel returns [0]: pt2rt_bench, which embeds
// Python, refused resnet50 that export-cli loads. Here a C++ Meta kernel that answers like
// the Python one is registered for the test's scope (torch::Library) instead of embedding
// Python.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "catch_compat.h"
#include "fixtures.h"
#include "pt2rt/model.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

/// The shapes torch._decomp's native_batch_norm gives on a non-CPU device: (output like the
/// input, save_mean [C], save_invstd [C]) whether training or not.
void python_like_batch_norm_meta(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  const at::Tensor input = (*stack)[stack->size() - n].toTensor();
  torch::jit::drop(*stack, n);
  const int64_t channels = input.size(1);
  stack->emplace_back(at::empty_like(input));
  stack->emplace_back(at::empty({channels}, input.options()));
  stack->emplace_back(at::empty({channels}, input.options()));
}

}  // namespace

TEST_CASE("an eval-mode batch norm whose Meta kernel answers [C] statistics still loads",
          "[meta][load]") {
  const std::string path = archive_path("cnn_bn", "default");
  Model plain = Model::load(path);
  plain.eval();
  const std::vector<at::Tensor> x = to_tensors(load_record("cnn_bn_ref.pt").at("inputs"));
  const std::vector<at::Tensor> want = plain.forward(x);
  {
    torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
    for (const char* name : {"native_batch_norm", "_native_batch_norm_legit_no_training"}) {
      if (c10::Dispatcher::singleton().findSchema({std::string("aten::") + name, ""})) {
        lib.impl(name, torch::CppFunction::makeFromBoxedFunction<&python_like_batch_norm_meta>());
      }
    }
    // The registration is in force: eval-mode statistics on the meta device are [C].
    const auto meta = at::TensorOptions().device(c10::kMeta);
    const at::Tensor stats = at::empty({4}, meta);
    const auto out = at::native_batch_norm(at::empty({2, 4, 3, 3}, meta), stats, stats, stats,
                                           stats, /*training=*/false, 0.1, 1e-5);
    REQUIRE(std::get<1>(out).sizes() == at::IntArrayRef{4});

    for (bool map_weights : {false, true}) {
      LoadOptions o;
      o.map_weights = map_weights;
      Model m = Model::load(path, c10::kCPU, o);  // threw FormatError "result 1 is float32[4]..."
      m.eval();
      const std::vector<at::Tensor> got = m.forward(x);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) CHECK(at::equal(got[i], want[i]));
    }
  }
}
