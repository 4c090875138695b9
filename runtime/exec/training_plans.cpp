// runtime/exec/training_plans.cpp — see training_plans.h.
#include "exec/training_plans.h"

#include "exec/model_state.h"

namespace pt2rt {
namespace {

std::unique_ptr<TrainingPlan> build_training_plan(const ModelState& s,
                                                  const std::vector<bool>& needs) {
  auto tp = std::make_unique<TrainingPlan>();
  tp->needs = needs;
  const size_t num_params = s.parameter_weights.size();
  const CompiledGraph& fw = *s.forward;

  // Backward: the needed Grad(of) outputs, delivered as soon as computed.
  std::vector<bool> saved_needed(fw.bindings.num_saved, false);
  if (s.backward) {
    const GraphBindings& bb = s.backward->bindings;
    PlanOptions bo;
    bo.deliver_early = true;
    bo.needed_outputs.assign(bb.outputs.size(), false);
    std::vector<uint32_t> target(bb.outputs.size(), 0);
    for (size_t j = 0; j < bb.outputs.size(); ++j) {
      const OutputBinding& b = bb.outputs[j];
      if (b.value < 0) continue;
      if (b.sink == OutputSink::WeightGrad) {
        target[j] = static_cast<uint32_t>(s.weight_parameter[b.index]);
      } else if (b.sink == OutputSink::UserInputGrad) {
        target[j] = static_cast<uint32_t>(num_params + b.index);
      } else {
        continue;
      }
      bo.needed_outputs[j] = target[j] < needs.size() && needs[target[j]];
      tp->any = tp->any || bo.needed_outputs[j];
    }
    if (tp->any) {
      tp->backward = s.backward->plan->specialize(bo);
      for (const Segment& seg : tp->backward->segments()) {
        std::vector<GradDelivery> grads;
        for (const Delivery& d : seg.deliveries) grads.push_back({d.output, target[d.output]});
        tp->segment_grads.push_back(std::move(grads));
      }
      for (size_t i = 0; i < bb.inputs.size(); ++i) {
        if (bb.inputs[i].source == InputSource::Saved && tp->backward->input_used(i)) {
          saved_needed[bb.inputs[i].index] = true;
        }
      }
    }
  }

  // Forward: user outputs and mutations always; Saved(k) only when the backward reads it.
  PlanOptions fo;
  fo.needed_outputs.assign(fw.bindings.outputs.size(), true);
  for (size_t j = 0; j < fw.bindings.outputs.size(); ++j) {
    const OutputBinding& b = fw.bindings.outputs[j];
    if (b.sink == OutputSink::Saved) fo.needed_outputs[j] = saved_needed[b.index];
  }
  tp->forward = fw.plan->specialize(fo);

  const Graph& g = fw.graph();
  std::vector<bool> seen(g.values.size(), false);
  for (const GraphInput& in : g.inputs) seen[in.value] = true;
  for (int64_t v : fw.bindings.user_output_values) {
    const bool alias = v >= 0 && seen[static_cast<size_t>(v)];
    tp->alias_output.push_back(alias);
    if (v >= 0) seen[static_cast<size_t>(v)] = true;
  }
  return tp;
}

}  // namespace

const TrainingPlan& TrainingPlans::get(const ModelState& state,
                                       const std::vector<bool>& needs) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& p : plans_) {
    if (p->needs == needs) return *p;
  }
  plans_.push_back(build_training_plan(state, needs));
  return *plans_.back();
}

size_t TrainingPlans::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

}  // namespace pt2rt
