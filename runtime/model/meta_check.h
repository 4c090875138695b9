// runtime/model/meta_check.h — every graph of a model run once on the meta device at
// load.
//
// The archive declares each value's dtype and sizes (TensorMeta); the runtime must not take
// them on trust, since a run's memory and time follow what the kernels actually compute. At
// load each compiled graph is executed on the meta device (c10::DeviceType::Meta: kernels
// compute result metadata, no data is allocated or touched), with the weights' recorded
// shapes, the user inputs' declared shapes and — for the backward graph — the forward graph's
// meta results as saved values and tangents. Then, node by node:
//   * every tensor result must have the declared dtype and sizes and a strided layout, and lie
//     inside its storage (catches unchecked views such as LibTorch 1.13's _reshape_alias);
//   * an op the meta device cannot run (c10::NotImplementedError: no Meta kernel) takes its
//     declared results instead, and its instruction is marked to have its results checked
//     against the declaration after every real run (ExecutionPlan::check_results_of);
//   * batch-norm style ops that mutate `running_mean`/`running_var` without saying so in
//     their schema (LibTorch 1.13) must not get them in training mode;
//   * memory (peak of live storages + kernel scratch) and work (run_cost.h) are summed.
// A graph over LoadOptions::run's bounds, or one whose declared metas lie, is refused with a
// FormatError naming the node and the figures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "exec/model_state.h"
#include "plan/op_resolution.h"
#include "pt2rt/load_options.h"

namespace pt2rt {

/// What one graph costs per run, as verified on the meta device.
struct GraphCost {
  uint64_t peak_bytes = 0;
  uint64_t work = 0;
  size_t unverified = 0;  ///< nodes without a Meta kernel (checked at run time instead)
};

/// Runs every compiled graph of `state` on the meta device (see above), marks instructions
/// that need run-time result checks in the real plans, and enforces `limits` (already
/// resolved: no zeros). Returns the cost of inference, forward and backward (absent graphs:
/// zero cost). Dynamic shapes: the graphs run at every symbol's range maximum; if that is
/// over `limits`, they run again at the range minima, and if those are within, the model is
/// bounded per call instead (state.call_bounds, call_bounds.h).
/// @throws FormatError naming the graph, node and op: a declared meta that differs from the
///   computed one, a view outside its storage, a node the meta device rejects, a graph over
///   a bound (with the figures, the LoadOptions field and the export-cli flag that raise it;
///   for a dynamic program: over it even at the range minima).
std::vector<GraphCost> check_on_meta(ModelState& state, const std::vector<ResolvedOp>& ops,
                                     const RunLimits& limits);

/// The cost of every graph (inference, forward, backward) at the symbol values `symbols`
/// (one per Program::symbols), verified as check_on_meta does; the plans are not touched.
/// Thread-safe. @throws FormatError as check_on_meta (a declared meta that the kernels
///   contradict at these values).
std::vector<GraphCost> costs_on_meta(const ModelState& state, const std::vector<ResolvedOp>& ops,
                                     const std::vector<int64_t>& symbols);

/// Why `costs` (inference, forward, backward) break `limits`, "" when they do not: the first
/// of graphs [first, last) over max_bytes, or their running total of work over max_work, with
/// the figures and the LoadOptions field and export-cli flag that raise the bound. `runs`
/// says what the work total stands for in the message (subject and verb).
std::string bound_excess(const std::vector<GraphCost>& costs, const RunLimits& limits,
                         size_t first = 0, size_t last = 3,
                         const char* runs = "one inference call and one training step need");

}  // namespace pt2rt
