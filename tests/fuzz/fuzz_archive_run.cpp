// fuzz_archive_run — libFuzzer target: archive bytes -> Model::load -> run the bundled example.
//
// As fuzz_archive_load, then, for a model that loads: inference on its first bundled example
// (eval mode), and when it has forward/backward graphs one training step (forward, then
// backward from the sum of its floating outputs); then, with an inference graph, the same
// bytes loaded as a deployment (LoadOptions::inference_only: weight-only values cached,
// oneDNN convolution weights packed, runtime/kernels/conv_prepack.h; for inputs of odd size also
// LoadOptions::onednn_benchmark: convolutions and linear layers timed against oneDNN at their
// declared sizes, runtime/plan/onednn_benchmark.h) and its inference run twice (computed, then
// from the cache). Anything but a pt2rt::Error, any sanitizer
// report, crash, timeout or excess memory is a finding.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/autograd.h>

#include <cstdint>
#include <cstring>

#include "pt2rt/errors.h"
#include "pt2rt/load_options.h"
#include "pt2rt/model.h"

namespace {

at::Tensor to_tensor(const pt2rt::TensorData& t) {
  at::Tensor out = at::empty(t.sizes, at::TensorOptions().dtype(t.dtype));
  if (!t.data.empty()) std::memcpy(out.data_ptr(), t.data.data(), t.data.size());
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  at::set_num_threads(1);
  try {
    pt2rt::Model model = pt2rt::Model::load(data, size);
    const pt2rt::Program& program = model.program();
    if (program.examples.empty()) return 0;
    std::vector<at::Tensor> inputs;
    for (const pt2rt::TensorData& t : program.examples[0].inputs) inputs.push_back(to_tensor(t));
    if (program.graph(pt2rt::GraphRole::Inference) != nullptr) model.forward(inputs);
    if (program.graph(pt2rt::GraphRole::Forward) != nullptr) {
      model.train();
      at::Tensor loss;
      for (const at::Tensor& out : model.forward(inputs)) {
        if (!out.defined() || !out.requires_grad()) continue;
        loss = loss.defined() ? loss + out.sum() : out.sum();
      }
      if (loss.defined()) torch::autograd::backward({loss});
    }
    if (program.graph(pt2rt::GraphRole::Inference) != nullptr) {
      pt2rt::LoadOptions serve;
      serve.inference_only = true;
      serve.onednn_benchmark = size % 2 == 1;
      pt2rt::Model deployed = pt2rt::Model::load(data, size, c10::kCPU, serve);
      deployed.forward(inputs);
      deployed.forward(inputs);
    }
  } catch (const pt2rt::Error&) {
  }
  return 0;
}
