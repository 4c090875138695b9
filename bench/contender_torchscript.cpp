// bench/contender_torchscript.cpp — TorchScript in C++ (torch::jit::load, Module::forward,
// torch::jit::freeze, torch::jit::optimize_for_inference), as an application would use it.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <torch/optim/sgd.h>
#include <torch/script.h>

#include <memory>

#include "workload.h"

namespace pt2rt::bench {
namespace {

std::vector<c10::IValue> as_ivalues(const std::vector<at::Tensor>& xs) {
  return std::vector<c10::IValue>(xs.begin(), xs.end());
}

}  // namespace

Call torchscript_inference(const std::string& path, const Workload& w, TorchScriptPrep prep) {
  auto module = std::make_shared<torch::jit::Module>(torch::jit::load(path));
  module->eval();
  if (prep == TorchScriptPrep::Freeze) *module = torch::jit::freeze(*module);
  if (prep == TorchScriptPrep::OptimizeForInference) {
    *module = torch::jit::optimize_for_inference(*module);
  }
  return [module, inputs = as_ivalues(w.inputs)] {
    c10::InferenceMode guard;
    module->forward(inputs);
  };
}

Call torchscript_training(const std::string& path, const Workload& w) {
  struct State {
    torch::jit::Module module;
    std::vector<at::Tensor> params;
    torch::optim::SGD opt;
    std::vector<c10::IValue> inputs;
    Workload w;
  };
  torch::jit::Module m = torch::jit::load(path);
  m.train();
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& p : m.named_parameters()) named.emplace_back(p.name, p.value);
  std::vector<at::Tensor> params = trainable(named, w);
  auto s = std::make_shared<State>(State{m, params, torch::optim::SGD(params, kLearningRate),
                                         as_ivalues(w.inputs), w});
  return [s] {
    zero_grads(s->params, s->w.set_to_none);
    at::Tensor loss = loss_of(s->module.forward(s->inputs).toTensor(), s->w);
    loss.backward();
    s->opt.step();
  };
}

Call torchscript_load(const std::string& path) {
  return [path] { torch::jit::Module m = torch::jit::load(path); };
}

}  // namespace pt2rt::bench
