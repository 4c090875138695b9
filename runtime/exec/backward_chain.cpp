// runtime/exec/backward_chain.cpp — see backward_chain.h.
#include "exec/backward_chain.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/variable.h>

#include "core/autograd_compat.h"
#include "exec/model_state.h"

namespace pt2rt {
namespace {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::variable_list;

/// One segment of the backward plan as an autograd node. Input: the continuation (ignored).
/// Outputs: the gradients the segment delivers, then (all but the last segment) the
/// continuation for the next segment.
class BackwardSegment final : public torch::autograd::Node {
 public:
  BackwardSegment(std::shared_ptr<BackwardRun> run, size_t index, edge_list edges)
      : Node(std::move(edges)), run_(std::move(run)), index_(index) {}

  std::string name() const override { return "pt2rt::BackwardSegment"; }

  variable_list apply(variable_list&& /*continuation*/) override {
    BackwardRun& r = *run_;
    const TrainingPlan& tp = *r.plan;
    if (!r.whole) tp.backward->run_segment(r.frame, r.outputs);
    const std::vector<GradDelivery>& grads = tp.segment_grads[index_];
    const bool last = index_ + 1 == tp.segment_grads.size();
    variable_list out;
    out.reserve(grads.size() + 1);
    for (const GradDelivery& g : grads) {
      if (r.whole) {  // copies where the backward was replayed (TrainingFunction::backward)
        out.push_back(std::move(r.whole_grads[g.output]));
        r.whole_grads[g.output] = at::Tensor();
        continue;
      }
      c10::IValue& v = r.outputs[g.output];
      // Moved out: the engine's input buffer then holds the only reference, so
      // AccumulateGrad can steal it into an undefined .grad.
      out.push_back(v.isTensor() ? std::move(v).toTensor() : at::Tensor());
      v = c10::IValue();
    }
    if (!last) {
      out.push_back(r.state->continuation);
    } else {
      r.frame = Frame();  // nothing of this run's backward stays alive
      r.outputs.clear();
      r.whole_grads.clear();
    }
    return out;
  }

 private:
  std::shared_ptr<BackwardRun> run_;
  size_t index_;
};

}  // namespace

at::Tensor make_backward_chain(const std::shared_ptr<BackwardRun>& run,
                               const std::vector<at::Tensor>& targets) {
  const TrainingPlan& tp = *run->plan;
  at::Tensor token = at::empty({}, run->state->continuation.options());
  NodePtr next;
  for (size_t k = tp.segment_grads.size(); k-- > 0;) {
    edge_list edges;
    edges.reserve(tp.segment_grads[k].size() + 1);
    for (const GradDelivery& g : tp.segment_grads[k]) {
      edges.push_back(torch::autograd::impl::gradient_edge(targets[g.target]));
    }
    if (next) edges.emplace_back(std::move(next), 0);
    next = make_node<BackwardSegment>(run, k, std::move(edges));
    next->add_input_metadata(token);
  }
  torch::autograd::impl::set_gradient_edge(token, Edge(std::move(next), 0));
  return token;
}

void start_backward(BackwardRun& run, const std::vector<c10::IValue>& saved,
                    const std::vector<at::Tensor>& tangents) {
  const ModelState& s = *run.state;
  const CompiledGraph& bw = *s.backward;
  const ExecutionPlan& plan = *run.plan->backward;
  run.frame = plan.start(bind_inputs(s, bw, nullptr, {}, &saved, &tangents));
  run.outputs.assign(bw.bindings.outputs.size(), c10::IValue());
}

std::vector<at::Tensor> run_whole_backward(BackwardRun& run, const std::vector<c10::IValue>& saved,
                                           const std::vector<at::Tensor>& tangents) {
  start_backward(run, saved, tangents);
  const TrainingPlan& tp = *run.plan;
  for (size_t k = 0; k < tp.segment_grads.size(); ++k) {
    tp.backward->run_segment(run.frame, run.outputs);
  }
  std::vector<at::Tensor> grads;
  grads.reserve(run.outputs.size());
  for (c10::IValue& v : run.outputs) grads.push_back(v.isTensor() ? v.toTensor() : at::Tensor());
  run.frame = Frame();
  run.outputs.clear();
  return grads;
}

}  // namespace pt2rt
