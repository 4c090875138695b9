// cli/steps.cpp — inference call and training step helpers shared by run and verify.
#include "steps.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/zeros_like.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>

#include "cli.h"
#include "tensor_io.h"

namespace pt2rt::cli {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

bool has_training_graphs(const Program& program) {
  return program.graph(GraphRole::Forward) != nullptr &&
         program.graph(GraphRole::Backward) != nullptr;
}

std::vector<int64_t> differentiable_outputs(const Program& program) {
  std::vector<int64_t> out;
  if (const Graph* bw = program.graph(GraphRole::Backward)) {
    for (const auto& in : bw->inputs) {
      if (in.descriptor.kind == InputKind::Tangent && in.descriptor.output &&
          in.descriptor.output->kind == OutputKind::Plain) {
        out.push_back(in.descriptor.output->idx);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int64_t> grad_inputs(const Program& program) {
  std::vector<int64_t> out;
  if (const Graph* bw = program.graph(GraphRole::Backward)) {
    for (const auto& o : bw->outputs) {
      if (o.descriptor.kind == OutputKind::Grad && o.descriptor.of &&
          o.descriptor.of->kind == InputKind::Plain) {
        out.push_back(o.descriptor.of->idx);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<at::Tensor> run_inference(Model& model, const std::vector<at::Tensor>& inputs,
                                      double* ms) {
  model.eval();
  const auto start = std::chrono::steady_clock::now();
  auto outputs = model.forward(inputs);
  if (ms) *ms = ms_since(start);
  return outputs;
}

TrainStep run_training_step(Model& model, std::vector<at::Tensor> inputs,
                            const std::vector<at::Tensor>& grad_outputs) {
  const Program& program = model.program();
  const auto input_grads = grad_inputs(program);
  for (int64_t i : input_grads) {
    if (i < static_cast<int64_t>(inputs.size())) {
      inputs[static_cast<size_t>(i)] = inputs[static_cast<size_t>(i)].detach().requires_grad_();
    }
  }
  for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();

  model.train();
  TrainStep step;
  auto start = std::chrono::steady_clock::now();
  step.outputs = model.forward(inputs);
  step.forward_ms = ms_since(start);

  std::vector<at::Tensor> roots, seeds;
  const auto diff = differentiable_outputs(program);
  if (!grad_outputs.empty() && grad_outputs.size() != diff.size()) {
    throw UsageError("--grad-outputs holds " + std::to_string(grad_outputs.size()) +
                     " tensors, the model has " + std::to_string(diff.size()) +
                     " differentiable outputs");
  }
  for (size_t k = 0; k < diff.size(); ++k) {
    const auto i = static_cast<size_t>(diff[k]);
    if (i >= step.outputs.size()) continue;
    const at::Tensor& out = step.outputs[i];
    at::Tensor seed = grad_outputs.empty() ? at::ones_like(out) : grad_outputs[k].to(out.device());
    if (seed.sizes() != out.sizes() || seed.scalar_type() != out.scalar_type()) {
      throw UsageError("grad output " + std::to_string(k) + " is " + describe(seed) + ", output " +
                       std::to_string(i) + " is " + describe(out));
    }
    if (out.requires_grad()) {
      roots.push_back(out);
      seeds.push_back(seed);
    }
  }
  start = std::chrono::steady_clock::now();
  if (!roots.empty()) torch::autograd::backward(roots, seeds);
  step.backward_ms = ms_since(start);

  for (const auto& [name, p] : model.named_parameters()) {
    if (!p.requires_grad()) continue;
    step.grads.emplace_back(name, p.grad().defined() ? p.grad() : at::zeros_like(p));
  }
  for (int64_t i : input_grads) {
    if (i >= static_cast<int64_t>(inputs.size())) continue;
    const at::Tensor& x = inputs[static_cast<size_t>(i)];
    step.grads.emplace_back("input:" + std::to_string(i),
                            x.grad().defined() ? x.grad() : at::zeros_like(x));
  }
  return step;
}

NamedTensors snapshot_buffers(const Model& model) {
  NamedTensors out;
  for (const auto& [name, b] : model.named_buffers()) out.emplace_back(name, b.detach().clone());
  return out;
}

void restore_buffers(const Model& model, const NamedTensors& snapshot) {
  at::NoGradGuard no_grad;
  auto buffers = model.named_buffers();
  for (size_t i = 0; i < buffers.size() && i < snapshot.size(); ++i) {
    buffers[i].second.copy_(snapshot[i].second);
  }
}

std::vector<at::Tensor> fresh_copies(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const auto& t : tensors) {
    out.push_back(t.defined() ? t.detach().clone().requires_grad_(t.requires_grad()) : t);
  }
  return out;
}

std::vector<at::Tensor> to_device(const std::vector<at::Tensor>& tensors, c10::Device device) {
  std::vector<at::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.to(device));
  return out;
}

}  // namespace pt2rt::cli
