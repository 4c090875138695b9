// runtime/exec/backward_chain.h — the backward plan as a chain of autograd nodes,
// so that each gradient reaches its parameter's `.grad` as soon as it is computed.
//
// Eager PyTorch accumulates a parameter's gradient (AccumulateGrad) right after the node
// that computes it, so at most one layer's fresh gradients are alive beside `.grad`. A
// backward graph run as one autograd node would return every gradient at once: a second
// full set of gradients alive at its end. Instead the backward plan is cut into segments
// (ExecutionPlan with PlanOptions::deliver_early) and each segment is one node of LibTorch's
// autograd graph:
//
//   user outputs ──grad_fn──▶ TrainingFunction node (starts the run: saved values and
//                               │                  incoming gradients bound into a frame)
//                               ▼ (a 0-dim "continuation" input, see below)
//                            BackwardSegment 0 ── grad ▶ AccumulateGrad(p) / input edges
//                               ▼
//                            BackwardSegment 1 ── grad ▶ ...
//                               ▼  ...
//
// Every gradient flows through an ordinary autograd edge (torch::autograd::impl::
// gradient_edge of the parameter or user input), so the engine runs AccumulateGrad —
// tensor hooks, retain_grad, `.grad` accumulation across calls, zero_grad(set_to_none)
// stealing — and torch::autograd::grad(outputs, inputs) captures instead of accumulating,
// exactly as for eager nodes. AccumulateGrad nodes have the highest priority in the
// engine's ready queue, so each runs before the next segment; a moved-out gradient held
// nowhere else is stolen into `.grad` or added in place and then freed. The frame releases
// saved activations after their last use, and the TrainingFunction node's saved variables
// are released by the engine after it ran (unless retain_graph), so activations die as the
// backward proceeds, as in eager.
//
// The continuation: the TrainingFunction takes one extra tensor input, a 0-dim "token"
// whose grad_fn is segment 0; its backward returns a gradient for it (a defined 0-dim
// tensor on the model's device, so the engine routes the next node to that device's
// queue), and every segment but the last has the next segment as its last next-edge.
//
// Lifetime: a BackwardRun (shared by the nodes of one forward call) holds the ModelState,
// the TrainingPlan and, between segments, the frame. Running the same graph's backward
// twice (retain_graph=True) starts a new frame; two backward passes of one graph at the same
// time are not supported (as for any node that keeps state between calls).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <vector>

#include "exec/training_graphs.h"
#include "exec/training_plans.h"
#include "plan/plan.h"

namespace pt2rt {

struct ModelState;

struct BackwardRun {
  std::shared_ptr<const ModelState> state;
  const TrainingPlan* plan = nullptr;
  Frame frame;                        ///< the backward plan's frame, between segments
  std::vector<c10::IValue> outputs;   ///< per backward graph output, until delivered
  /// LoadOptions::cuda_graphs (training_graphs.h): the forward's ticket. With one, the
  /// backward runs as one call (replayed from a graph where the forward was) and the
  /// segments only deliver `whole_grads` (copies of a replay's static gradients).
  std::shared_ptr<TrainingGraphs::Ticket> ticket;
  bool whole = false;
  std::vector<at::Tensor> whole_grads;  ///< per backward graph output (undefined: none)
};

/// Creates the segment nodes of `run->plan` and returns the continuation token: a new 0-dim
/// tensor whose grad_fn is segment 0. `targets`: parameters (named_parameters() order) then
/// user inputs — gradient k of TrainingPlan::segment_grads goes to gradient_edge(targets[k]).
at::Tensor make_backward_chain(const std::shared_ptr<BackwardRun>& run,
                               const std::vector<at::Tensor>& targets);

/// Starts a backward run: binds `saved` values and `tangents` into a new frame (called by the
/// TrainingFunction node's backward). @throws InputError, ExecutionError as the plan does.
void start_backward(BackwardRun& run, const std::vector<c10::IValue>& saved,
                    const std::vector<at::Tensor>& tangents);

/// The whole backward plan at once (every segment): per backward graph output its tensor
/// (undefined where the output is None). Leaves `run`'s frame empty. The call a CUDA graph
/// records (training_graphs.h). @throws as start_backward and the plan do.
std::vector<at::Tensor> run_whole_backward(BackwardRun& run, const std::vector<c10::IValue>& saved,
                                           const std::vector<at::Tensor>& tangents);

}  // namespace pt2rt
