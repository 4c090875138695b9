// pt2rt/grad_sketch.h — gradient sketches: compact gradient references of bundled examples
// (schema 1.2). The Python side (exporter/pt2rt/ir/grad_sketch.py) writes them; this computes the
// same sketch of a runtime gradient and applies the tolerance rule. Both must agree bit for bit
// on the signs; schema/README.md "Gradient sketches" is the definition:
//
//   g = the gradient converted to float64, flattened row-major; n = numel (< 2^32)
//   norm = sqrt(sum g[j]^2), sum = sum g[j], abs_sum = sum |g[j]|, max_abs = max |g[j]|
//   projections[k] = sum_j sign_k(j) * g[j], k < K
//   lowbias32(x): x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15; x *= 0x846ca68b; x ^= x >> 16
//                 (uint32 arithmetic; C. Wellons, "Prospecting for Hash Functions", 2018)
//   key_k = lowbias32(seed + (k + 1) * 0x9E3779B9), sign_k(j) = lowbias32(j ^ key_k) < 2^31 ? +1 : -1
//
// Tolerances ((rtol, atol) = torch.testing.assert_close's defaults for the gradient's dtype,
// R = reference, A = actual, r = n * 2^-52 * R.abs_sum for float64 summation rounding):
//   |A.norm - R.norm|        <= atol*sqrt(n) + rtol*R.norm + r
//   |A.sum - R.sum|, |A.abs_sum - R.abs_sum| <= atol*n + rtol*R.abs_sum + r
//   |A.max_abs - R.max_abs|  <= atol + rtol*R.max_abs + r
//   |A.proj[k] - R.proj[k]|  <= 6 * (atol*sqrt(n) + rtol*R.norm) + r
// The first three follow from assert_close's element-wise rule (a gradient it accepts always
// passes them); the projection bound holds for such a gradient with probability
// >= 1 - 2 exp(-18) (Hoeffding). A wrong gradient is caught when its error is large in L2
// terms; an error in one small element may need full references (export option).
//
// The float64 rule (schema 1.5, when the reference carries the sketch R64 of eager PyTorch's
// float64 gradient and D = sqrt(n) * float64_rmse = ||g32 - g64||_2, eager float32's own
// distance from float64): a statistic outside the tolerance above still passes when
//   |A - R64| <= kFloat64Multiplier * c * D + tol / 10,
// c = 1 for norm and max_abs, sqrt(n) for sum and abs_sum (Cauchy-Schwarz), 6 for projections
// (the Hoeffding bound above) — what a gradient within kFloat64Multiplier * D of float64 in L2
// can move each statistic: torch._dynamo.utils.same's fp64_ref rule (res_error <= multiplier
// * ref_error + tol / 10) through the sketch. The runtime's gradient is then about as close
// to float64 as eager float32's is (rounding of another device or LibTorch). The rule applies
// only to a reference whose statistic agrees with its own float64 record
// (|R - R64| <= c * D + tol / 10); an altered reference does not.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "pt2rt/program.h"

namespace pt2rt {

/// The sketch of `grad` (any device; copied to CPU float64) with `projections` sign vectors
/// from `seed`; `name` is copied into it. Throws std::invalid_argument when `grad` is not
/// real floating or has 2^32 elements or more. Cost: O(numel x projections).
GradSketch compute_grad_sketch(const std::string& name, const at::Tensor& grad, uint32_t seed,
                               size_t projections);

/// The float64 rule's multiplier (above; torch._dynamo.utils.same uses 2 to 3).
inline constexpr double kFloat64Multiplier = 3.0;

/// Result of checking a gradient against its sketch.
struct GradSketchCheck {
  bool pass = false;
  bool by_float64 = false;  ///< some statistic passed by the float64 rule only
  double max_abs = 0.0;  ///< largest |A - R| over the statistics
  double max_rel = 0.0;  ///< largest |A - R| / |R| (inf where R is 0 and A is not)
  std::string problem;   ///< on failure: the first statistic out of tolerance, with numbers
};

/// Sketches `grad` like `reference` (same seed, same number of projections) and applies the
/// tolerance rule above with `rtol`/`atol` (assert_close's defaults for reference.dtype:
/// export-cli verify's default_tolerance), and the float64 rule where `reference.float64` is
/// set. A dtype or size mismatch, or a NaN, fails.
/// `seed`: the ExampleReferences' grad_sketch_seed.
GradSketchCheck check_grad_sketch(const at::Tensor& grad, const GradSketch& reference,
                                  uint32_t seed, double rtol, double atol);

/// sign_k(j) of the definition above as +1 / -1 (exposed for tests).
int grad_sketch_sign(uint32_t seed, uint32_t k, uint32_t j);

}  // namespace pt2rt
