// runtime/exec/autograd_function.cpp — see autograd_function.h.
#include "exec/autograd_function.h"

#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/batched_copy.h"
#include "exec/backward_chain.h"

namespace pt2rt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// Keeps the backward run (and through it the ModelState) alive inside the autograd node
/// (ctx->saved_data holds IValues).
struct RunCapsule : torch::CustomClassHolder {
  explicit RunCapsule(std::shared_ptr<BackwardRun> r) : run(std::move(r)) {}
  std::shared_ptr<BackwardRun> run;
};

constexpr const char* kRunKey = "pt2rt.run";
/// Saved values kept on ctx instead of save_for_backward: non-tensors (SymInts) and the
/// SavedNoVcCheck activations (no version-counter check, as AOTAutograd's runtime does).
constexpr const char* kStashKey = "pt2rt.saved_on_ctx";

/// Runs the (specialised) forward plan; fills `results` (user outputs, aliased where the
/// plan says so) and `saved` (Saved(k), None where not needed); copies mutations back.
void run_forward(const ModelState& s, const TrainingPlan& tp,
                 const std::vector<at::Tensor>& user, variable_list& results,
                 std::vector<c10::IValue>* saved) {
  const CompiledGraph& fw = *s.forward;
  std::vector<c10::IValue> out = tp.forward->run(bind_inputs(s, fw, nullptr, user, nullptr, nullptr));
  results.assign(fw.bindings.user_output_values.size(), at::Tensor());
  for (size_t j = 0; j < fw.bindings.outputs.size(); ++j) {
    const OutputBinding& b = fw.bindings.outputs[j];
    if (b.sink == OutputSink::UserOutput) {
      results[b.index] = out[j].toTensor();
      if (tp.alias_output[b.index]) results[b.index] = results[b.index].alias();
    } else if (b.sink == OutputSink::Saved && saved) {
      (*saved)[b.index] = std::move(out[j]);
    }
  }
  if (saved) {
    // A saved activation sharing memory with a buffer about to be overwritten keeps the
    // pre-mutation value (save_for_backward would otherwise see a bumped version).
    for (size_t j = 0; j < fw.bindings.outputs.size(); ++j) {
      const OutputBinding& b = fw.bindings.outputs[j];
      if (b.sink != OutputSink::MutatedWeight) continue;
      const at::Tensor& buffer = s.weights[b.index];
      for (c10::IValue& v : *saved) {
        if (v.isTensor() && v.toTensor().defined() && v.toTensor().is_alias_of(buffer)) {
          v = v.toTensor().clone();
        }
      }
    }
  }
  apply_mutations(s, fw, out, user);
}

/// LoadOptions::cuda_graphs applies to this training call: graphs were made for the model
/// and no user output aliases an input (a copy of a graph's static output could not).
bool graphable(const ModelState& s, const TrainingPlan& tp) {
  if (!s.training_graphs) return false;
  for (bool alias : tp.alias_output) {
    if (alias) return false;
  }
  return true;
}

/// run_forward through s.training_graphs (training_graphs.h): the captured call returns the
/// user outputs, then the Saved(k) values (None as undefined: a graphable forward saves
/// tensors only). Replayed user outputs are copied; saved values stay the graph's static
/// tensors, which its backward graph reads.
void run_forward_graphed(const ModelState& s, const TrainingPlan& tp,
                         const std::vector<at::Tensor>& user, variable_list& results,
                         std::vector<c10::IValue>& saved,
                         std::shared_ptr<TrainingGraphs::Ticket>* ticket) {
  const size_t num_out = s.forward->bindings.user_output_values.size();
  const TrainingGraphs::Result r = s.training_graphs->forward(
      &tp, user,
      [&](const std::vector<at::Tensor>& in) {
        variable_list res;
        std::vector<c10::IValue> sv(saved.size());
        run_forward(s, tp, in, res, &sv);
        std::vector<at::Tensor> flat(res.begin(), res.end());
        for (const c10::IValue& v : sv) flat.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
        return flat;
      },
      ticket);
  // Replayed user outputs are the graph's static tensors: copies, in one batched launch.
  std::vector<at::Tensor> user_outputs(r.outputs.begin(), r.outputs.begin() + num_out);
  if (r.replayed) user_outputs = clone_all(user_outputs);
  results.assign(user_outputs.begin(), user_outputs.end());
  for (size_t k = 0; k < saved.size(); ++k) {
    const at::Tensor& v = r.outputs[num_out + k];
    saved[k] = v.defined() ? c10::IValue(v) : c10::IValue();
  }
}

struct TrainingFunction : public torch::autograd::Function<TrainingFunction> {
  /// inputs: the user inputs, then the continuation token (backward_chain.h).
  static variable_list forward(AutogradContext* ctx, const std::shared_ptr<BackwardRun>& run,
                               at::TensorList inputs) {
    const ModelState& s = *run->state;
    const TrainingPlan& tp = *run->plan;
    std::vector<at::Tensor> user(inputs.begin(), inputs.end() - 1);

    variable_list results;
    std::vector<c10::IValue> saved(s.forward->bindings.num_saved);
    if (graphable(s, tp)) {
      run_forward_graphed(s, tp, user, results, saved, &run->ticket);
    } else {
      run_forward(s, tp, user, results, &saved);
    }

    variable_list to_save;
    to_save.reserve(saved.size());
    std::vector<bool> stash(saved.size());
    bool has_stash = false;
    for (size_t k = 0; k < saved.size(); ++k) {
      const c10::IValue& v = saved[k];
      stash[k] = !v.isTensor() || s.forward->bindings.saved_without_version_check[k];
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
    ctx->saved_data[kRunKey] = c10::IValue::make_capsule(c10::make_intrusive<RunCapsule>(run));

    variable_list non_differentiable;
    for (size_t i = 0; i < results.size(); ++i) {
      if (!s.output_differentiable[i]) non_differentiable.push_back(results[i]);
    }
    if (!non_differentiable.empty()) ctx->mark_non_differentiable(non_differentiable);
    return results;
  }

  /// Binds the saved values and incoming gradients into the backward frame; the gradients
  /// themselves come from the segment nodes. Returns one entry per forward input: nothing
  /// for the run and the user inputs, the continuation for the token.
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto capsule = ctx->saved_data.at(kRunKey).toCapsule();
    BackwardRun& run = *static_cast<RunCapsule*>(capsule.get())->run;
    // Before the saved variables are unpacked: a replay's static input copy bumped the
    // version of a saved input, and autograd's in-place message would not say why.
    if (run.ticket) run.state->training_graphs->check_current(*run.ticket);

    variable_list saved_vars = ctx->get_saved_variables();
    std::vector<c10::IValue> saved(saved_vars.begin(), saved_vars.end());
    saved_vars.clear();
    auto it = ctx->saved_data.find(kStashKey);
    if (it != ctx->saved_data.end()) {
      auto stashed = it->second.toList();
      for (size_t k = 0; k < saved.size(); ++k) {
        c10::IValue v = stashed.get(k);
        if (!v.isNone()) saved[k] = v;
      }
    }
    if (run.ticket) {
      // LoadOptions::cuda_graphs: the backward as one call (training_graphs.h).
      const TrainingGraphs::Result r = run.state->training_graphs->backward(
          run.ticket, grad_outputs, [&](const std::vector<at::Tensor>& tangents) {
            return run_whole_backward(run, saved, tangents);
          });
      run.whole = true;
      // A replay's gradients are its static tensors, which the next replay overwrites: the
      // segments hand out copies, made in one batched launch (batched_copy.h).
      run.whole_grads = r.replayed ? clone_all(r.outputs) : r.outputs;
    } else {
      start_backward(run, saved, grad_outputs);
    }
    const size_t num_user = run.state->forward->bindings.user_input_positions.size();
    variable_list grads(1 + num_user + 1);
    grads.back() = run.state->continuation;
    return grads;
  }
};

/// Whether each parameter, then each user input, needs a gradient — the TrainingPlans key.
/// The buffer is reused by the calling thread (no allocation per call).
const std::vector<bool>& gradient_needs(const ModelState& s, const std::vector<at::Tensor>& user,
                                        bool grad_enabled) {
  thread_local std::vector<bool> needs;
  needs.assign(s.parameter_weights.size() + user.size(), false);
  if (!grad_enabled || !s.backward) return needs;
  for (size_t p = 0; p < s.parameter_weights.size(); ++p) {
    needs[p] = s.weights[s.parameter_weights[p]].requires_grad();
  }
  for (size_t i = 0; i < user.size(); ++i) {
    needs[s.parameter_weights.size() + i] = user[i].requires_grad();
  }
  return needs;
}

}  // namespace

std::vector<at::Tensor> run_training_forward(const std::shared_ptr<const ModelState>& state,
                                             const std::vector<at::Tensor>& user_inputs) {
  const ModelState& s = *state;
  const bool grad = c10::GradMode::is_enabled();
  const TrainingPlan& tp = s.training_plans.get(s, gradient_needs(s, user_inputs, grad));
  if (!tp.any) {
    // No gradient can be asked for: the forward graph alone, nothing saved, no autograd node.
    c10::AutoGradMode no_grad(false);
    variable_list results;
    run_forward(s, tp, user_inputs, results, nullptr);
    return results;
  }
  auto run = std::make_shared<BackwardRun>();
  run->state = state;
  run->plan = &tp;
  std::vector<at::Tensor> targets;
  targets.reserve(s.parameter_weights.size() + user_inputs.size());
  for (size_t w : s.parameter_weights) targets.push_back(s.weights[w]);
  targets.insert(targets.end(), user_inputs.begin(), user_inputs.end());

  std::vector<at::Tensor> inputs(user_inputs);
  inputs.push_back(make_backward_chain(run, targets));
  // at::TensorList, not std::vector<Tensor>: see the header.
  return TrainingFunction::apply(run, at::TensorList(inputs));
}

}  // namespace pt2rt
