// runtime/plan/prepack_convolutions.h — the plan rewrite onto kernels/conv_prepack.h's kernels (the
// file comment there says when and why).
#pragma once

#include <vector>

#include "plan/onednn_benchmark.h"
#include "plan/plan.h"

namespace pt2rt {

/// Rewrites the eligible convolutions of `instructions` (a CPU plan's list in graph order,
/// before finalize) as described in the file comment. `graph` is the plan's graph;
/// `weight_only[v]` (one flag per graph value) says whether value v is computed from model
/// weights alone, so that the plan's cached prologue computes it. Does nothing when oneDNN is
/// unavailable or disabled. `choice`: OneDnnChoice::Aten rewrites those ATen itself runs
/// through oneDNN; Benchmark also those `benchmark` times faster on oneDNN (onednn_benchmark.h:
/// at the declared sizes, bounded); OneDnn every eligible one with consistent sizes.
/// @returns the number of convolutions rewritten.
size_t prepack_convolutions(std::vector<Instruction>& instructions, const Graph& graph,
                            const std::vector<bool>& weight_only, OneDnnChoice choice,
                            OneDnnBenchmark& benchmark);

}  // namespace pt2rt
