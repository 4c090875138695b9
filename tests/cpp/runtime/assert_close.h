// tests/cpp/runtime/assert_close.h — torch.testing.assert_close for C++ tests.
//
// Mirrors torch 1.13's torch.testing.assert_close: shapes and dtypes must match; values are
// close when |actual - expected| <= atol + rtol * |expected| elementwise (NaN never equal);
// default (rtol, atol) per dtype: float16 (1e-3, 1e-5), bfloat16 (1.6e-2, 1e-5),
// float32/complex64 (1.3e-6, 1e-5), float64/complex128 (1e-7, 1e-7), integers/bool exact.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

namespace pt2rt::test {

struct Closeness {
  bool ok = false;
  double max_abs_error = 0;  ///< max |actual - expected| (0 for empty tensors)
  std::string message;       ///< why not close (empty when ok)
};

/// Default (rtol, atol) of torch.testing.assert_close for `dtype`.
std::pair<double, double> default_tolerances(c10::ScalarType dtype);

/// Compares like torch.testing.assert_close; `rtol`/`atol` default per dtype (both or
/// neither must be given, as in torch). Tensors may live on any device.
Closeness assert_close(const at::Tensor& actual, const at::Tensor& expected,
                       std::optional<double> rtol = std::nullopt,
                       std::optional<double> atol = std::nullopt);

}  // namespace pt2rt::test
