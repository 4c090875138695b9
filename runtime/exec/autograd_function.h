// runtime/exec/autograd_function.h — the training forward as one
// torch::autograd::Function.
//
// The C++ counterpart of the autograd.Function that aot_compile_joint_with_descriptors
// builds around a forward and a backward graph ("Extending torch.func with
// autograd.Function" in the PyTorch docs; LibTorch's torch/csrc/autograd/custom_function.h):
//   plans    the forward and backward plans specialised for the gradients needed now
//            (parameters' and user inputs' requires_grad: training_plans.h); with none
//            needed the forward graph runs alone, without an autograd node;
//   forward  runs the forward plan (grad mode off, as Function::apply does), binds inputs by
//            descriptor (Param/Buffer/Constant → the model's tensors, Plain → user inputs),
//            saves the Saved(k) outputs the pruned backward reads with
//            ctx->save_for_backward, marks integer/bool user outputs non-differentiable and
//            copies InputMutation values into their buffers under no-grad;
//   backward feeds the saved values and the incoming gradients (undefined → zeros, as
//            LibTorch materializes them) into the backward plan's frame; the plan's segments
//            then run as a chain of autograd nodes that hand each gradient to its parameter's
//            AccumulateGrad (or user input's edge) as soon as it is computed
//            (backward_chain.h), so no second full set of gradients is ever alive.
// The Function's tensor inputs are passed as one at::TensorList (user inputs, then the
// chain's continuation token): LibTorch 1.13 takes a std::vector<Tensor> argument as a
// non-tensor and would silently not connect it to the graph.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "exec/model_state.h"

namespace pt2rt {

/// Training-mode forward over the forward and backward plans. `state` must have a forward
/// graph; the autograd nodes keep `state` alive. With grad mode off (or no backward graph)
/// no gradient is needed: the forward graph runs alone.
/// @returns the user outputs (Plain(i) order); floating ones carry grad_fn when grad mode
///   is on and any parameter or input requires grad.
/// @throws ExecutionError from the forward plan (backward errors surface from
///   loss.backward()).
std::vector<at::Tensor> run_training_forward(const std::shared_ptr<const ModelState>& state,
                                             const std::vector<at::Tensor>& user_inputs);

}  // namespace pt2rt
