// runtime/model/call_bounds.h — run bounds checked per call, for a dynamic-shape
// program that is over LoadOptions::run at its symbols' range maxima but within them at the range
// minima.
//
// Load (meta_check.h) verifies every graph on the meta device at the range maxima; a program
// within the bounds there needs nothing per call (Model holds no CallBounds). Otherwise each
// call is bounded before anything runs, from the symbol values its inputs bind
// (input_check.h): each value is rounded up to its cell — the next number with 3 significant
// bits, no larger than the range maximum (sym_eval.h `symbol_cell`) — and the cost at the cell
// of the graphs the call runs must be within the bounds: an inference call, the inference
// graph's peak bytes and work; a training forward, the forward's and the backward's peak
// bytes each and their work together (the backward runs at the forward's sizes). The costs of
// a cell are computed once on the meta device (costs_on_meta) and cached. Costs grow with
// each symbol (runtime/README "Dynamic shapes"), so the cell's cost
// bounds the call's; the cells overestimate a size by at most 25%, and a range of N values
// has at most 4 log2(N) cells per symbol.
//
// Thread-safety: check() may be called concurrently (Model::forward from several threads);
// the cache is guarded by a shared mutex, and a cell computed by two threads at once is
// stored once, with the same verdict.
#pragma once

#include <cstdint>
#include <map>
#include <shared_mutex>
#include <string>
#include <vector>

#include "model/meta_check.h"
#include "plan/op_resolution.h"
#include "pt2rt/load_options.h"

namespace pt2rt {

struct ModelState;

class CallBounds {
 public:
  /// `limits` resolved (no zeros); `ops` the program's resolved operators; `maxima` each
  /// symbol's range maximum.
  CallBounds(RunLimits limits, std::vector<ResolvedOp> ops, std::vector<int64_t> maxima);

  /// Checks one call whose inputs bound the symbols to `symbols` (Program::symbols order):
  /// an inference call, or (`training`) a training forward and its backward.
  /// @throws InputError naming the symbol values (e.g. `batch=1000`), the cell they were
  ///   bounded at, the figure, the bound, and the LoadOptions field / export-cli flag
  ///   (--max-run-bytes, --max-run-work, --trusted) that raises it.
  /// @throws FormatError when the archive's declared shapes do not hold at the cell.
  void check(const ModelState& state, const std::vector<int64_t>& symbols, bool training) const;

  /// Cells computed so far (tests).
  size_t cells() const;

 private:
  struct Cell {
    std::vector<GraphCost> costs;  ///< inference, forward, backward at the cell
    std::string format_error;      ///< non-empty: the declared shapes fail at the cell
  };
  Cell measure(const ModelState& state, const std::vector<int64_t>& cell) const;

  RunLimits limits_;
  std::vector<ResolvedOp> ops_;
  std::vector<int64_t> maxima_;
  mutable std::shared_mutex mutex_;
  mutable std::map<std::vector<int64_t>, Cell> cells_;
};

}  // namespace pt2rt
