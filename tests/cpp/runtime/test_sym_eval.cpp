// SymExpr evaluation (runtime/core/sym_eval.h): arithmetic with Python's floor semantics, overflow
// and division by zero as nullopt, range maxima and minima, the per-call bound cells.
#include "catch_compat.h"
#include "core/sym_eval.h"

namespace pt2rt {
namespace {

SymExpr c(int64_t v) { SymExpr e; e.op = SymOp::Const; e.value = v; return e; }
SymExpr s(uint32_t i) { SymExpr e; e.op = SymOp::Symbol; e.symbol = i; return e; }
SymExpr op(SymOp o, SymExpr a, SymExpr b) {
  SymExpr e;
  e.op = o;
  e.operands = {std::move(a), std::move(b)};
  return e;
}

}  // namespace

TEST_CASE("sym_eval: affine sizes and Python floor semantics", "[sym_eval]") {
  const std::vector<int64_t> v = {7, 3};
  CHECK(eval_sym(op(SymOp::Add, op(SymOp::Mul, c(2), s(0)), c(1)), v) == 15);
  CHECK(eval_sym(op(SymOp::FloorDiv, c(-7), c(2)), v) == -4);
  CHECK(eval_sym(op(SymOp::Mod, c(-7), c(2)), v) == 1);
  CHECK(eval_sym(op(SymOp::CeilDiv, s(0), s(1)), v) == 3);
  CHECK(eval_sym(op(SymOp::Max, s(0), s(1)), v) == 7);
  CHECK(eval_sym(op(SymOp::Lt, s(1), s(0)), v) == 1);
}

TEST_CASE("sym_eval: overflow, division by zero and unknown symbols give nullopt", "[sym_eval]") {
  const std::vector<int64_t> v = {INT64_MAX};
  CHECK_FALSE(eval_sym(op(SymOp::Mul, s(0), c(2)), v).has_value());
  CHECK_FALSE(eval_sym(op(SymOp::Add, s(0), c(1)), v).has_value());
  CHECK_FALSE(eval_sym(op(SymOp::FloorDiv, c(1), c(0)), v).has_value());
  CHECK_FALSE(eval_sym(s(3), v).has_value());
}

TEST_CASE("sym_eval: range maxima, unbounded symbols take their hint", "[sym_eval]") {
  Program p;
  p.symbols = {{"batch", 5}, {"seq", 9}};
  p.range_constraints = {{0, 1, 64}, {1, 2, INT64_MAX}};
  bool bounded = true;
  CHECK(symbol_maxima(p, &bounded) == std::vector<int64_t>{64, 9});
  CHECK_FALSE(bounded);
  p.range_constraints[1].max = 128;
  CHECK(symbol_maxima(p, &bounded) == std::vector<int64_t>{64, 128});
  CHECK(bounded);
  Dim d;
  d.value = 5;
  d.expr = op(SymOp::Add, s(0), c(1));
  CHECK(dim_value(d, {64, 128}) == 65);
}

TEST_CASE("sym_eval: range minima, clamped into [0, max]", "[sym_eval]") {
  Program p;
  p.symbols = {{"batch", 5}, {"seq", 9}, {"free", 3}};
  p.range_constraints = {{0, 2, 64}, {1, -4, 128}};
  CHECK(symbol_minima(p) == std::vector<int64_t>{2, 0, 3});
  p.range_constraints[0] = {0, 100, 64};  // an empty range: no minimum above the maximum
  CHECK(symbol_minima(p)[0] == 64);
}

TEST_CASE("sym_eval: cells round up to 3 significant bits, capped at the maximum", "[sym_eval]") {
  const int64_t big = int64_t{1} << 40;
  std::vector<int64_t> cells;
  for (int64_t v : {1, 7, 8, 9, 10, 11, 33, 40, 41, 450, 512, 513, 1000, 1024}) {
    cells.push_back(symbol_cell(v, big));
  }
  CHECK(cells == std::vector<int64_t>{1, 7, 8, 10, 10, 12, 40, 40, 48, 512, 512, 640, 1024, 1024});
  CHECK(symbol_cell(1000, 1000) == 1000);
  CHECK(symbol_cell(900, 1000) == 1000);  // 1024, capped
  CHECK(symbol_cell(INT64_MAX - 1, INT64_MAX) == INT64_MAX);
  for (int64_t v = 1; v < 5000; ++v) {  // never below v, at most 25% above, 3 significant bits
    const int64_t c = symbol_cell(v, big);
    INFO(v << " -> " << c);
    CHECK(c >= v);
    CHECK(c * 4 <= v * 5);
    CHECK((c >> __builtin_ctzll(static_cast<uint64_t>(c))) < 8);
  }
}

}  // namespace pt2rt
