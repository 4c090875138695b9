// SymExpr evaluation (runtime/sym_eval.h): arithmetic with Python's floor semantics, overflow
// and division by zero as nullopt, range maxima.
#include "catch_compat.h"
#include "sym_eval.h"

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

}  // namespace pt2rt
