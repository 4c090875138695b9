// runtime/exec/input_check.h — user inputs checked against a graph's Plain input
// metadata.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <vector>

#include "exec/bindings.h"
#include "pt2rt/program.h"

namespace pt2rt {

/// Checks count, definedness, layout (strided, dense: no sparse, mkldnn, nested or quantized
/// tensors), dtype, rank, static sizes (exact), symbolic sizes against the
/// symbol's range constraint, and device (== `device`; a device without index matches any
/// index of its type) of every user input, in that order. Returns the symbol values the
/// inputs bind (Program::symbols order; empty for a program without symbols).
/// @throws InputError naming the input by index and name, e.g.
///   `input 0 (x): expected float32[8, 64] on cpu, got float64[8, 64]`.
std::vector<int64_t> check_inputs(const std::vector<at::Tensor>& inputs, const Program& program,
                  const Graph& graph, const GraphBindings& bindings, c10::Device device);

/// Dynamic shapes (called by check_inputs after the per-input checks): binds every symbol from
/// the user inputs' dims that are a bare symbol, checks it against its range constraint and
/// that every use of one symbol has one size, then evaluates every other symbolic input dim (a
/// derived dim, e.g. `batch + 1`) and compares. Nothing runs before all of it holds.
/// Returns the symbol values (-1 for a symbol no input dim binds).
/// @throws InputError e.g. `input 0 (x) dim 0: batch = 65 is outside [1, 64]`,
///   `input 1 (y) dim 0: expected (1 + batch) = 6, got 7`.
std::vector<int64_t> bind_symbols(const std::vector<at::Tensor>& inputs, const Program& program,
                  const Graph& graph, const GraphBindings& bindings);

}  // namespace pt2rt
