// Gradient sketches (pt2rt/grad_sketch.h): the signs equal the Python exporter's
// (tests/python/test_grad_sketch.py holds the same golden values), and the tolerance rule
// accepts rounding-level differences and refuses wrong gradients.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <vector>

#include "catch_compat.h"
#include "pt2rt/constants.h"
#include "pt2rt/grad_sketch.h"

namespace pt2rt {
namespace {

std::vector<int> signs(uint32_t seed, uint32_t k) {
  std::vector<int> out;
  for (uint32_t j = 0; j < 16; ++j) out.push_back(grad_sketch_sign(seed, k, j));
  return out;
}

at::Tensor gradient() {
  at::manual_seed(0);
  return at::randn({64, 32});
}

GradSketchCheck check(const at::Tensor& g, const GradSketch& ref) {
  return check_grad_sketch(g, ref, kGradSketchSeed, 1.3e-6, 1e-5);
}

}  // namespace

TEST_CASE("grad_sketch: signs equal the Python definition", "[grad_sketch]") {
  CHECK(signs(kGradSketchSeed, 0) ==
        std::vector<int>{1, 1, 1, -1, 1, -1, -1, -1, 1, -1, 1, -1, 1, 1, 1, -1});
  CHECK(signs(kGradSketchSeed, 7) ==
        std::vector<int>{1, 1, 1, 1, -1, -1, 1, 1, 1, -1, -1, -1, -1, 1, -1, -1});
  CHECK(signs(12345, 3) ==
        std::vector<int>{-1, 1, 1, -1, -1, 1, -1, -1, -1, -1, 1, -1, -1, 1, 1, -1});
}

TEST_CASE("grad_sketch: statistics of a small gradient", "[grad_sketch]") {
  const at::Tensor g = at::tensor({3.0, -4.0}, at::kFloat);
  const GradSketch s = compute_grad_sketch("w", g, kGradSketchSeed, 2);
  CHECK(s.name == "w");
  CHECK(s.dtype == at::kFloat);
  CHECK(s.sizes == std::vector<int64_t>{2});
  CHECK(s.norm == 5.0);
  CHECK(s.sum == -1.0);
  CHECK(s.abs_sum == 7.0);
  CHECK(s.max_abs == 4.0);
  REQUIRE(s.projections.size() == 2);
  CHECK(s.projections[0] == 3.0 * grad_sketch_sign(kGradSketchSeed, 0, 0) -
                                4.0 * grad_sketch_sign(kGradSketchSeed, 0, 1));
  CHECK_THROWS_AS(compute_grad_sketch("i", at::ones({2}, at::kLong), 1, 1), std::invalid_argument);
}

TEST_CASE("grad_sketch: close gradients pass, wrong ones fail", "[grad_sketch]") {
  const at::Tensor g = gradient();
  const GradSketch ref = compute_grad_sketch("w", g, kGradSketchSeed, kGradSketchProjections);
  CHECK(check(g, ref).pass);
  CHECK(check(g * (1 + 1e-7), ref).pass);
  CHECK(check(g + 0.9e-5 * at::sign(g), ref).pass);  // at assert_close's atol, every element

  const GradSketchCheck scaled = check(g * 1.01, ref);
  CHECK_FALSE(scaled.pass);
  CHECK(scaled.problem.find("sketch norm") == 0);
  const GradSketchCheck permuted = check(g.flatten().flip(0).view_as(g), ref);
  CHECK_FALSE(permuted.pass);
  CHECK(permuted.problem.find("sketch projection") == 0);
  CHECK_FALSE(check(g + 1e-3, ref).pass);
  CHECK_FALSE(check(g * std::numeric_limits<double>::quiet_NaN(), ref).pass);
  CHECK_FALSE(check(g.view(-1), ref).pass);
  CHECK_FALSE(check(g.to(at::kDouble), ref).pass);
}

TEST_CASE("grad_sketch: the float64 rule passes eager-sized rounding, not wrong gradients",
          "[grad_sketch][float64]") {
  // A gradient whose float32 reference is 1e-4 (relative) from float64 — a model that
  // amplifies rounding — and a runtime result as far from float64 in another direction (other
  // kernels' rounding): outside the plain tolerance, within the float64 rule.
  at::manual_seed(1);
  const at::Tensor g64 = at::randn({64, 32}, at::kDouble) * 1000;
  const at::Tensor g32 = (g64 * (1 + 1e-4 * at::randn_like(g64))).to(at::kFloat);
  const at::Tensor other = (g64 * (1 + 1e-4 * at::randn_like(g64))).to(at::kFloat);
  GradSketch ref = compute_grad_sketch("w", g32, kGradSketchSeed, kGradSketchProjections);
  const GradSketchCheck plain = check(other, ref);
  REQUIRE_FALSE(plain.pass);  // the plain rule alone refuses it
  CHECK_FALSE(plain.by_float64);

  ref.float64 = std::make_shared<const GradSketch>(
      compute_grad_sketch("w", g64, kGradSketchSeed, kGradSketchProjections));
  ref.float64_rmse = (g32.to(at::kDouble) - g64).pow(2).mean().sqrt().item<double>();
  const GradSketchCheck with64 = check(other, ref);
  CHECK(with64.pass);
  CHECK(with64.by_float64);
  CHECK(check(g32, ref).pass);
  // Wrong gradients stay wrong: scaled, permuted, shifted.
  CHECK_FALSE(check(other * 1.01, ref).pass);
  CHECK_FALSE(check(other.flatten().flip(0).view_as(other), ref).pass);
  CHECK_FALSE(check(other + 1.0, ref).pass);
  // Without the recorded distance the rule has nothing to go by.
  ref.float64_rmse = std::numeric_limits<double>::quiet_NaN();
  CHECK_FALSE(check(other, ref).pass);
}

}  // namespace pt2rt
