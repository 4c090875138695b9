// runtime/autograd_function.h — the training forward as one torch::autograd::Function.
//
// The C++ counterpart of the autograd.Function that aot_compile_joint_with_descriptors
// builds around a forward and a backward graph
// (shared/reference/extending-func-autograd-function.txt; LibTorch's
// torch/csrc/autograd/custom_function.h):
//   forward  runs the forward plan (grad mode off, as Function::apply does), binds inputs by
//            descriptor (Param → the Function's own parameter inputs, Buffer/Constant → the
//            model's tensors, Plain → user inputs), saves the Saved(k) outputs with
//            ctx->save_for_backward, marks integer/bool user outputs non-differentiable and
//            copies InputMutation values into their buffers under no-grad;
//   backward feeds the saved values and the incoming gradients (undefined → zeros of the
//            output's shape and dtype) to the backward plan and returns one gradient per
//            Function input, bound by the Grad(of) descriptors (undefined where none).
// The Function's tensor inputs are passed as one at::TensorList (parameters in
// named_parameters() order, then user inputs): LibTorch 1.13 takes a std::vector<Tensor>
// argument as a non-tensor and would silently not connect it to the graph.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "model_state.h"

namespace pt2rt {

/// Training-mode forward: one autograd node over the forward and backward plans.
/// `state` must have forward and backward graphs; the node keeps `state` alive.
/// @returns the user outputs (Plain(i) order); floating ones carry grad_fn when any
///   parameter or input requires grad.
/// @throws ExecutionError from the forward plan (backward errors surface from
///   loss.backward()).
std::vector<at::Tensor> run_training_forward(const std::shared_ptr<const ModelState>& state,
                                             const std::vector<at::Tensor>& user_inputs);

}  // namespace pt2rt
