// runtime/exec/training_plans.h — forward and backward plans specialised per set
// of needed gradients (runtime backward pruning).
//
// Which gradients a training forward must make possible is known when it runs: a parameter
// needs one when it requires grad *now* (parameters frozen after load with
// requires_grad_(false) need none), a user input when it requires grad. For each such set
// the plans are specialised once (ExecutionPlan::specialize) and cached:
//   backward  only the Grad(of) outputs needed, every node only the others needed removed,
//             cut into segments that deliver each gradient as soon as it exists
//             (backward_chain.h);
//   forward   only the Saved(k) outputs that pruned backward reads (the others are not kept,
//             and nodes that only computed them are removed).
// This is what AOTAutograd does ahead of time when parameters are frozen at export; here it
// happens at run time, without re-exporting. With no gradient needed at all, the training
// forward runs without an autograd node (like eager PyTorch when nothing requires grad).
//
// Thread-safety: get() may be called concurrently; built plans are immutable and live as
// long as the TrainingPlans (the ModelState).
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "plan/plan.h"

namespace pt2rt {

struct ModelState;

/// A gradient a backward segment delivers: backward output `output` is the gradient of
/// gradient target `target` (parameter position p, or num_parameters + user input index).
struct GradDelivery {
  uint32_t output;
  uint32_t target;
};

struct TrainingPlan {
  /// The key: per parameter (named_parameters() order), then per user input — whether its
  /// gradient is needed.
  std::vector<bool> needs;
  bool any = false;  ///< some gradient is needed (else: no backward)
  std::unique_ptr<ExecutionPlan> forward;
  std::unique_ptr<ExecutionPlan> backward;  ///< null when !any
  /// Per backward segment, the gradients it delivers, in delivery order.
  std::vector<std::vector<GradDelivery>> segment_grads;
  /// Per user output: it must be returned as an alias (its value is a graph input, or the
  /// same value as an earlier output), so that autograd never rewrites the history of a
  /// tensor the caller already holds.
  std::vector<bool> alias_output;
};

class TrainingPlans {
 public:
  /// The plans for `needs` (see TrainingPlan::needs), built on first use.
  /// @throws FormatError as ExecutionPlan::specialize.
  const TrainingPlan& get(const ModelState& state, const std::vector<bool>& needs) const;

  /// Number of specialisations built so far (tests).
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<TrainingPlan>> plans_;
};

}  // namespace pt2rt
