// tests/cpp/runtime/test_device_dependent.cpp — results whose shape depends on the device
// (schema 1.5, Value::device_dependent_shape; schema/README.md "Device-dependent result
// shapes"), pinned down on the CPU: the result check's rule, and an archive whose eval-mode
// BatchNorm runs on a kernel that answers like CUDA's ([C] saved statistics where LibTorch's
// CPU kernel gives [0]) — registered here for the CPU key, for the test's scope
// (torch::Library), as test_meta_kernels.cpp does for the meta key.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <atomic>

#include "catch_compat.h"
#include "fixtures.h"
#include "pt2rt/model.h"
#include "core/result_check.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

Value stat(bool device_dependent) {
  Value v;
  v.name = "native_batch_norm.1";
  v.meta = TensorMeta{};
  v.meta->dtype = at::kFloat;
  v.meta->sizes = {Dim{0}};  // what LibTorch's CPU kernel makes in eval mode
  v.meta->strides = {Dim{1}};
  v.meta->storage_offset = Dim{0};
  v.device_dependent_shape = device_dependent;
  return v;
}

std::atomic<int> cuda_like_calls{0};

/// native_batch_norm as CUDA's kernel answers in eval mode: the normalised input and [C]
/// statistics (running mean, inverse standard deviation).
void cuda_like_batch_norm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  auto arg = [&](size_t i) { return (*stack)[stack->size() - n + i]; };
  const at::Tensor x = arg(0).toTensor();
  const at::Tensor w = arg(1).toOptional<at::Tensor>().value_or(at::Tensor());
  const at::Tensor b = arg(2).toOptional<at::Tensor>().value_or(at::Tensor());
  const at::Tensor mean = arg(3).toTensor(), var = arg(4).toTensor();
  const double eps = arg(7).toDouble();
  REQUIRE_FALSE(arg(5).toBool());  // the archive's inference graph: eval mode
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = x.size(1);
  const at::Tensor invstd = (var + eps).rsqrt();
  at::Tensor y = (x - mean.view(shape)) * invstd.view(shape);
  if (w.defined()) y = y * w.view(shape);
  if (b.defined()) y = y + b.view(shape);
  torch::jit::drop(*stack, n);
  stack->emplace_back(y);
  stack->emplace_back(mean.clone());
  stack->emplace_back(invstd);
  ++cuda_like_calls;
}

}  // namespace

TEST_CASE("a device-dependent result is checked by dtype and an element bound",
          "[device][result_check]") {
  const at::Tensor c4 = at::zeros({4});
  CHECK(check_result(stat(true), c4, CheckAt::Run, nullptr, 36).empty());
  CHECK(check_result(stat(true), at::zeros({0}), CheckAt::Run, nullptr, 36).empty());
  CHECK_THAT(check_result(stat(true), at::zeros({4}, at::kDouble), CheckAt::Run, nullptr, 36),
             Contains("shape depends on the device"));
  CHECK_THAT(check_result(stat(true), at::zeros({100}), CheckAt::Run, nullptr, 36),
             Contains("more than a result whose shape depends on the device may have: 36"));
  // Unmarked, the same [4] is a shape the archive does not declare.
  CHECK_THAT(check_result(stat(false), c4, CheckAt::Run, nullptr, 36),
             Contains("the archive declares float32[0]"));
}

TEST_CASE("an eval-mode batch norm whose kernel answers [C] statistics, as CUDA's, runs",
          "[device][load]") {
  const std::string path = archive_path("cnn_bn", "default");
  Model plain = Model::load(path);
  plain.eval();
  const std::vector<at::Tensor> x = to_tensors(load_record("cnn_bn_ref.pt").at("inputs"));
  const std::vector<at::Tensor> want = plain.forward(x);
  {
    torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::CPU, __FILE__, __LINE__);
    lib.impl("native_batch_norm", torch::CppFunction::makeFromBoxedFunction<&cuda_like_batch_norm>());
    cuda_like_calls = 0;
    Model m = Model::load(path);
    m.eval();
    const std::vector<at::Tensor> got = m.forward(x);
    CHECK(cuda_like_calls > 0);  // the CUDA-like kernel ran ...
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {  // ... and its [C] statistics were accepted
      CHECK(at::allclose(got[i], want[i], 1e-5, 1e-6));
    }
  }
}
