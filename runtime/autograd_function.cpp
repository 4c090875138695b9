// runtime/autograd_function.cpp — see autograd_function.h.
#include "autograd_function.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

namespace pt2rt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Keeps the ModelState alive inside the autograd node (ctx->saved_data holds IValues).
struct StateCapsule : torch::CustomClassHolder {
  explicit StateCapsule(std::shared_ptr<const ModelState> s) : state(std::move(s)) {}
  std::shared_ptr<const ModelState> state;
};

constexpr const char* kStateKey = "pt2rt.state";
/// Saved values kept on ctx instead of save_for_backward: non-tensors (SymInts) and the
/// SavedNoVcCheck activations (no version-counter check, as AOTAutograd's runtime does).
constexpr const char* kStashKey = "pt2rt.saved_on_ctx";

struct TrainingFunction : public torch::autograd::Function<TrainingFunction> {
  static variable_list forward(AutogradContext* ctx,
                               const std::shared_ptr<const ModelState>& state,
                               at::TensorList inputs) {
    const ModelState& s = *state;
    const CompiledGraph& fw = *s.forward;
    const size_t num_params = s.parameter_weights.size();
    at::TensorList params = inputs.slice(0, num_params);
    std::vector<at::Tensor> user(inputs.begin() + num_params, inputs.end());

    std::vector<c10::IValue> out =
        fw.plan->run(bind_inputs(s, fw, &params, user, nullptr, nullptr));

    variable_list results(fw.bindings.user_output_values.size());
    std::vector<c10::IValue> saved(fw.bindings.num_saved);
    for (size_t j = 0; j < fw.bindings.outputs.size(); ++j) {
      const OutputBinding& b = fw.bindings.outputs[j];
      if (b.sink == OutputSink::UserOutput) results[b.index] = out[j].toTensor();
      else if (b.sink == OutputSink::Saved) saved[b.index] = out[j];
    }
    // A saved activation sharing memory with a buffer about to be overwritten keeps the
    // pre-mutation value (save_for_backward would otherwise see a bumped version).
    for (size_t j = 0; j < fw.bindings.outputs.size(); ++j) {
      const OutputBinding& b = fw.bindings.outputs[j];
      if (b.sink != OutputSink::MutatedWeight) continue;
      const at::Tensor& buffer = s.weights[b.index];
      for (c10::IValue& v : saved) {
        if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_alias_of(buffer)) {
          v = v.toTensor().clone();
        }
      }
    }
    apply_mutations(s, fw, out, user);

    variable_list to_save;
    to_save.reserve(saved.size());
    std::vector<bool> stash(saved.size());
    bool has_stash = false;
    for (size_t k = 0; k < saved.size(); ++k) {
      const c10::IValue& v = saved[k];
      stash[k] = !v.isTensor() || fw.bindings.saved_without_version_check[k];
      to_save.push_back(stash[k] ? at::Tensor() : v.toTensor());
      has_stash |= stash[k] && !v.isNone();
    }
    ctx->save_for_backward(std::move(to_save));
    if (has_stash) {
      c10::impl::GenericList stashed(c10::AnyType::get());
      for (size_t k = 0; k < saved.size(); ++k) {
        stashed.push_back(stash[k] ? saved[k] : c10::IValue());
      }
      ctx->saved_data[kStashKey] = std::move(stashed);
    }
    ctx->saved_data[kStateKey] = c10::IValue::make_capsule(c10::make_intrusive<StateCapsule>(state));

    variable_list non_differentiable;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!s.output_differentiable[i]) non_differentiable.push_back(results[i]);
    }
    if (!non_differentiable.empty()) ctx->mark_non_differentiable(non_differentiable);
    return results;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto capsule = ctx->saved_data.at(kStateKey).toCapsule();
    const ModelState& s = *static_cast<StateCapsule*>(capsule.get())->state;
    const CompiledGraph& bw = *s.backward;

    variable_list saved_vars = ctx->get_saved_variables();
    std::vector<c10::IValue> saved(saved_vars.begin(), saved_vars.end());
    auto it = ctx->saved_data.find(kStashKey);
    if (it != ctx->saved_data.end()) {
      auto stashed = it->second.toList();
      for (size_t k = 0; k < saved.size(); ++k) {
        c10::IValue v = stashed.get(k);
        if (!v.isNone()) saved[k] = v;
      }
    }
    std::vector<at::Tensor> no_user_inputs;
    std::vector<c10::IValue> out =
        bw.plan->run(bind_inputs(s, bw, nullptr, no_user_inputs, &saved, &grad_outputs));

    // One gradient per Function input: [state (non-tensor), parameters..., user inputs...].
    const size_t num_params = s.parameter_weights.size();
    const size_t num_user = s.forward->bindings.user_input_positions.size();
    variable_list grads(1 + num_params + num_user);
    for (size_t j = 0; j < bw.bindings.outputs.size(); ++j) {
      const OutputBinding& b = bw.bindings.outputs[j];
      if (b.value < 0 || !out[j].isTensor()) continue;
      if (b.sink == OutputSink::WeightGrad) {
        grads[1 + s.weight_parameter[b.index]] = out[j].toTensor();
      } else if (b.sink == OutputSink::UserInputGrad) {
        grads[1 + num_params + b.index] = out[j].toTensor();
      }
    }
    return grads;
  }
};

}  // namespace

std::vector<at::Tensor> run_training_forward(const std::shared_ptr<const ModelState>& state,
                                             const std::vector<at::Tensor>& user_inputs) {
  std::vector<at::Tensor> inputs;
  inputs.reserve(state->parameter_weights.size() + user_inputs.size());
  for (size_t w : state->parameter_weights) inputs.push_back(state->weights[w]);
  inputs.insert(inputs.end(), user_inputs.begin(), user_inputs.end());
  // at::TensorList, not std::vector<Tensor>: see the header.
  return TrainingFunction::apply(state, at::TensorList(inputs));
}

}  // namespace pt2rt
