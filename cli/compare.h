// cli/compare.h — torch.testing.assert_close semantics for `export-cli verify`.
#pragma once

#include <ATen/core/Tensor.h>

#include <limits>
#include <optional>
#include <string>

#include "pt2rt/grad_sketch.h"

namespace pt2rt::cli {

/// assert_close's default tolerances for `dtype` (torch/testing/_comparison.py):
/// float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5), float32 (1.3e-6, 1e-5),
/// float64 (1e-7, 1e-7), complex like their parts, integers and bool exact (0, 0).
struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
};
Tolerance default_tolerance(c10::ScalarType dtype);

/// `export-cli verify --rtol/--atol`: each given value replaces the default of every
/// floating dtype; integers and bool stay exact. `cross_device` (references computed on
/// another device type than the one verifying, Producer::capture_device): floating defaults
/// are raised to at least kCrossDeviceTolerance, where no option sets them.
struct ToleranceOverride {
  std::optional<double> rtol, atol;
  bool cross_device = false;
  Tolerance for_dtype(c10::ScalarType dtype) const;
};

/// rtol = atol of PyTorch's own CPU-vs-CUDA consistency test (test/test_ops.py,
/// test_compare_cpu): different kernels (cuDNN's convolution algorithms, other reduction
/// orders) round differently by more than assert_close's float32 defaults.
inline constexpr double kCrossDeviceTolerance = 1e-3;

/// The float64 rule (schema/README.md "The float64 rule", after torch._dynamo.utils.same with
/// fp64_ref): a floating result that fails the element-wise tolerance still passes when
/// RMSE(actual, reference) <= (kFloat64Multiplier - 1) * e + atol / 10, where e =
/// RMSE(reference, float64 reference) recorded at export — which bounds RMSE(actual, float64
/// reference) by kFloat64Multiplier * e + atol / 10 (triangle inequality): the result is
/// about as close to float64 as eager float32 itself is. kFloat64Multiplier: pt2rt/grad_sketch.h.

/// Result of comparing `actual` with `expected`.
struct Comparison {
  bool pass = false;
  double max_abs = 0.0;  ///< max |actual - expected| over the elements
  double max_rel = 0.0;  ///< max |actual - expected| / |expected| (inf where expected is 0)
  bool by_float64 = false;  ///< passed by the float64 rule, not the element-wise tolerance
  std::string problem;   ///< why it failed, or how it passed ("float64 rule: ...")
};

/// Close when dtype and shape agree and every element satisfies
/// |a - e| <= atol + rtol * |e| (equal values, infinities included, and NaN where the
/// reference has NaN, pass: assert_close with equal_nan=True — the reference is eager's own
/// result), or, failing that, by the float64 rule when `float64_rmse` is finite. Both tensors
/// may live on any device.
Comparison compare(const at::Tensor& actual, const at::Tensor& expected, const Tolerance& tol,
                   double float64_rmse = std::numeric_limits<double>::quiet_NaN());

}  // namespace pt2rt::cli
