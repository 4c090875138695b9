// runtime/plan/prepack_linears.h — the plan rewrite onto kernels/linear_prepack.h's kernels (the
// file comment there says when and why).
#pragma once

#include <vector>

#include "plan/onednn_benchmark.h"
#include "plan/plan.h"

namespace pt2rt {

/// Rewrites the eligible `addmm` / `mm` instructions of `instructions` (a CPU plan's list in
/// graph order, before finalize) as described in the file comment. `weight_only[v]` (one flag
/// per graph value): value v is computed from model weights alone. Does nothing for
/// OneDnnChoice::Aten, or when oneDNN is unavailable or disabled.
/// @returns the number of instructions rewritten.
size_t prepack_linears(std::vector<Instruction>& instructions, const Graph& graph,
                       const std::vector<bool>& weight_only, OneDnnChoice choice,
                       OneDnnBenchmark& benchmark);

}  // namespace pt2rt
