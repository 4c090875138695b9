// cli/compare.h — torch.testing.assert_close semantics for `export-cli verify`.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

namespace pt2rt::cli {

/// assert_close's default tolerances for `dtype` (torch/testing/_comparison.py):
/// float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5), float32 (1.3e-6, 1e-5),
/// float64 (1e-7, 1e-7), complex like their parts, integers and bool exact (0, 0).
struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
};
Tolerance default_tolerance(c10::ScalarType dtype);

/// Result of comparing `actual` with `expected`.
struct Comparison {
  bool pass = false;
  double max_abs = 0.0;  ///< max |actual - expected|
  double max_rel = 0.0;  ///< max |actual - expected| / |expected| (inf where expected is 0)
  std::string problem;   ///< non-empty when dtype/shape differ or values are not close
};

/// Close when dtype and shape agree and every element satisfies
/// |a - e| <= atol + rtol * |e| (equal values, infinities included, always pass; NaN fails,
/// as with assert_close's equal_nan=False). Both tensors may live on any device.
Comparison compare(const at::Tensor& actual, const at::Tensor& expected);

}  // namespace pt2rt::cli
