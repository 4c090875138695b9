// cli/steps.h — one inference call and one training step (forward + backward) on a
// pt2rt::Model, as `run` and `verify` perform them.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "pt2rt/model.h"

namespace pt2rt::cli {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Whether the archive holds forward and backward graphs (exported with train=True).
bool has_training_graphs(const Program& program);
/// Indices i of the user outputs Plain(i) the backward graph takes a Tangent for.
std::vector<int64_t> differentiable_outputs(const Program& program);
/// Indices i of the user inputs Plain(i) that get a Grad output in the backward graph.
std::vector<int64_t> grad_inputs(const Program& program);

/// Eval mode, inference graph. `*ms` receives the wall time of forward().
std::vector<at::Tensor> run_inference(Model& model, const std::vector<at::Tensor>& inputs,
                                      double* ms);

struct TrainStep {
  std::vector<at::Tensor> outputs;  ///< user outputs of the training forward
  NamedTensors grads;               ///< FQN -> grad per trainable parameter, then "input:<i>"
  double forward_ms = 0.0, backward_ms = 0.0;
};

/// Training mode: clears parameter gradients, runs forward, then backward with
/// `grad_outputs` (one per differentiable output, in order; empty: ones_like each).
/// Mutates the model's buffers (e.g. BatchNorm running stats) like eager PyTorch.
/// @throws UsageError when grad_outputs do not match the differentiable outputs.
TrainStep run_training_step(Model& model, std::vector<at::Tensor> inputs,
                            const std::vector<at::Tensor>& grad_outputs);

/// Copies of every buffer, and putting them back (to undo a training forward).
NamedTensors snapshot_buffers(const Model& model);
void restore_buffers(const Model& model, const NamedTensors& snapshot);

/// Copies of `tensors` (detached, requires_grad kept) for one call of a model that may
/// mutate its inputs in place (an InputMutation of a user input is written back).
std::vector<at::Tensor> fresh_copies(const std::vector<at::Tensor>& tensors);

/// `tensors` moved to `device` (no copy when already there).
std::vector<at::Tensor> to_device(const std::vector<at::Tensor>& tensors, c10::Device device);

}  // namespace pt2rt::cli
