// runtime/core/sym_eval.h — evaluating the archive's SymExpr trees (dynamic shapes).
//
// A symbolic size, stride or SymInt value is a SymExpr tree over Program::symbols
// (schema/pt2rt.fbs `SymExpr`). Given one value per symbol (bound from the user inputs' sizes at
// each call, or the range maxima at load), `eval_sym` computes it with checked int64 arithmetic
// (torch's sympy semantics: FloorDiv/CeilDiv/Mod round toward -inf, as Python's // and %). No
// string or map lookup: symbols are indices into the value vector.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt {

/// The value of `e` with symbol i = `symbols[i]`; nullopt on overflow, division by zero or a
/// symbol index outside `symbols` (the loader's validation rules the latter out).
std::optional<int64_t> eval_sym(const SymExpr& e, const std::vector<int64_t>& symbols);

/// A dim's value: `d.value` when static, else its expression's (nullopt as for `eval_sym`).
std::optional<int64_t> dim_value(const Dim& d, const std::vector<int64_t>& symbols);

/// Each symbol's range maximum (Program::range_constraints; a symbol without one, or with an
/// unbounded one, takes its hint and `*all_bounded` becomes false).
std::vector<int64_t> symbol_maxima(const Program& program, bool* all_bounded);

/// Each symbol's range minimum (at least 0, at most its maximum as `symbol_maxima` gives it; a
/// symbol without a range constraint takes its hint). With the maxima, the two corners that
/// bound every call's cost (sizes grow with each symbol; runtime/README "Dynamic shapes").
std::vector<int64_t> symbol_minima(const Program& program);

/// The cell of a symbol value for the per-call run bounds (call_bounds.h): `v` rounded up to
/// the next number with at most 3 significant bits (m * 2^k, m in 4..7: 1, 2, ..., 8, 10, 12,
/// 14, 16, 20, 24, 28, 32, 40, ...; at most 25% above `v`), no larger than `max`.
int64_t symbol_cell(int64_t v, int64_t max);

/// `batch=450, seq=77`: the symbols' names with `values` (Program::symbols order), for messages.
std::string symbols_text(const Program& program, const std::vector<int64_t>& values);

}  // namespace pt2rt
