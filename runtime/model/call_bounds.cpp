// runtime/model/call_bounds.cpp — see call_bounds.h.
#include "model/call_bounds.h"

#include <mutex>

#include "core/sym_eval.h"
#include "exec/model_state.h"
#include "model/meta_check.h"
#include "pt2rt/errors.h"

namespace pt2rt {

CallBounds::CallBounds(RunLimits limits, std::vector<ResolvedOp> ops, std::vector<int64_t> maxima)
    : limits_(limits), ops_(std::move(ops)), maxima_(std::move(maxima)) {}

CallBounds::Cell CallBounds::measure(const ModelState& state,
                                     const std::vector<int64_t>& cell) const {
  try {
    return Cell{costs_on_meta(state, ops_, cell), std::string()};
  } catch (const FormatError& e) {
    return Cell{{}, e.what()};
  }
}

void CallBounds::check(const ModelState& state, const std::vector<int64_t>& symbols,
                       bool training) const {
  std::vector<int64_t> cell(maxima_);
  for (size_t i = 0; i < cell.size() && i < symbols.size(); ++i) {
    // A symbol no input dim binds (-1) is bounded at its maximum.
    cell[i] = symbols[i] < 0 ? maxima_[i] : symbol_cell(symbols[i], maxima_[i]);
  }
  const Cell* found = nullptr;
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = cells_.find(cell);
    if (it != cells_.end()) found = &it->second;  // entries are never erased or changed
  }
  if (found == nullptr) {
    Cell fresh = measure(state, cell);  // outside the lock: a meta run takes milliseconds
    std::unique_lock<std::shared_mutex> lock(mutex_);
    found = &cells_.emplace(cell, std::move(fresh)).first->second;
  }
  std::string refusal = found->format_error;
  if (refusal.empty()) {
    refusal = training ? bound_excess(found->costs, limits_, 1, 3,
                                      "this training step (forward + backward) needs")
                       : bound_excess(found->costs, limits_, 0, 1, "this inference call needs");
    if (refusal.empty()) return;
  }
  const std::string call = symbols_text(*state.program, symbols);
  const std::string at = symbols_text(*state.program, cell);
  if (!found->format_error.empty()) {
    throw FormatError(refusal + " (at " + at + ", for a call with " + call + ")");
  }
  throw InputError("a call with " + call + " is over the run bounds (checked at " + at +
                   ", its sizes rounded up to 3 significant bits): " + refusal);
}

size_t CallBounds::cells() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return cells_.size();
}

}  // namespace pt2rt
