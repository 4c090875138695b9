// runtime/core/sym_eval.cpp — see sym_eval.h.
#include "core/sym_eval.h"

#include <algorithm>

namespace pt2rt {
namespace {

std::optional<int64_t> floor_div(int64_t a, int64_t b) {
  if (b == 0 || (a == INT64_MIN && b == -1)) return std::nullopt;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

std::optional<int64_t> eval_sym(const SymExpr& e, const std::vector<int64_t>& symbols) {
  switch (e.op) {
    case SymOp::Const: return e.value;
    case SymOp::Symbol:
      if (e.symbol >= symbols.size()) return std::nullopt;
      return symbols[e.symbol];
    case SymOp::Neg: {
      if (e.operands.size() != 1) return std::nullopt;
      auto a = eval_sym(e.operands[0], symbols);
      if (!a || *a == INT64_MIN) return std::nullopt;
      return -*a;
    }
    default: break;
  }
  if (e.operands.size() != 2) return std::nullopt;
  auto a = eval_sym(e.operands[0], symbols);
  auto b = eval_sym(e.operands[1], symbols);
  if (!a || !b) return std::nullopt;
  int64_t r = 0;
  switch (e.op) {
    case SymOp::Add: if (__builtin_add_overflow(*a, *b, &r)) return std::nullopt; return r;
    case SymOp::Sub: if (__builtin_sub_overflow(*a, *b, &r)) return std::nullopt; return r;
    case SymOp::Mul: if (__builtin_mul_overflow(*a, *b, &r)) return std::nullopt; return r;
    case SymOp::FloorDiv: return floor_div(*a, *b);
    case SymOp::CeilDiv: {
      if (*a == INT64_MIN) return std::nullopt;
      auto q = floor_div(-*a, *b);
      if (!q || *q == INT64_MIN) return std::nullopt;
      return -*q;
    }
    case SymOp::Mod: {
      auto q = floor_div(*a, *b);
      if (!q) return std::nullopt;
      return *a - *q * *b;
    }
    case SymOp::Max: return std::max(*a, *b);
    case SymOp::Min: return std::min(*a, *b);
    case SymOp::Eq: return *a == *b;
    case SymOp::Ne: return *a != *b;
    case SymOp::Lt: return *a < *b;
    case SymOp::Le: return *a <= *b;
    case SymOp::Gt: return *a > *b;
    case SymOp::Ge: return *a >= *b;
    default: return std::nullopt;
  }
}

std::optional<int64_t> dim_value(const Dim& d, const std::vector<int64_t>& symbols) {
  if (d.is_static()) return d.value;
  return eval_sym(*d.expr, symbols);
}

std::vector<int64_t> symbol_maxima(const Program& program, bool* all_bounded) {
  std::vector<int64_t> out(program.symbols.size());
  std::vector<bool> bounded(out.size(), false);
  for (size_t i = 0; i < out.size(); ++i) out[i] = program.symbols[i].hint;
  for (const RangeConstraint& rc : program.range_constraints) {
    if (rc.symbol < out.size() && rc.max != INT64_MAX) {
      out[rc.symbol] = rc.max;
      bounded[rc.symbol] = true;
    }
  }
  *all_bounded = std::all_of(bounded.begin(), bounded.end(), [](bool b) { return b; });
  return out;
}

std::vector<int64_t> symbol_minima(const Program& program) {
  bool bounded = true;
  const std::vector<int64_t> maxima = symbol_maxima(program, &bounded);
  std::vector<int64_t> out(program.symbols.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = program.symbols[i].hint;
  for (const RangeConstraint& rc : program.range_constraints) {
    if (rc.symbol < out.size()) out[rc.symbol] = rc.min;
  }
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = std::clamp<int64_t>(out[i], 0, std::max<int64_t>(maxima[i], 0));
  }
  return out;
}

int64_t symbol_cell(int64_t v, int64_t max) {
  if (v >= max) return max;
  if (v <= 8) return v;
  // v = m * 2^k + r with m in 4..7; round r up (unsigned: v < 2^63, so no overflow).
  const uint64_t u = static_cast<uint64_t>(v);
  const uint64_t step = uint64_t{1} << (63 - __builtin_clzll(u) - 2);
  const uint64_t cell = (u + step - 1) / step * step;
  return cell >= static_cast<uint64_t>(max) ? max : static_cast<int64_t>(cell);
}

std::string symbols_text(const Program& program, const std::vector<int64_t>& values) {
  std::string s;
  for (size_t i = 0; i < values.size() && i < program.symbols.size(); ++i) {
    s += (s.empty() ? "" : ", ") + program.symbols[i].name + "=" + std::to_string(values[i]);
  }
  return s;
}

}  // namespace pt2rt
