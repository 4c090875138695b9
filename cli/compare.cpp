// cli/compare.cpp — assert_close-style comparison (default tolerances per dtype).
#include "compare.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/view_as_real.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <sstream>

#include "tensor_io.h"

namespace pt2rt::cli {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

Tolerance default_tolerance(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Half:
    case c10::ScalarType::ComplexHalf:
      return {1e-3, 1e-5};
    case c10::ScalarType::BFloat16:
      return {1.6e-2, 1e-5};
    case c10::ScalarType::Float:
    case c10::ScalarType::ComplexFloat:
      return {1.3e-6, 1e-5};
    case c10::ScalarType::Double:
    case c10::ScalarType::ComplexDouble:
      return {1e-7, 1e-7};
    default:
      return {0.0, 0.0};
  }
}

Tolerance ToleranceOverride::for_dtype(c10::ScalarType dtype) const {
  Tolerance t = default_tolerance(dtype);
  if (c10::isFloatingType(dtype) || c10::isComplexType(dtype)) {
    if (cross_device) {
      t.rtol = std::max(t.rtol, kCrossDeviceTolerance);
      t.atol = std::max(t.atol, kCrossDeviceTolerance);
    }
    if (rtol) t.rtol = *rtol;
    if (atol) t.atol = *atol;
  }
  return t;
}

Comparison compare(const at::Tensor& actual, const at::Tensor& expected, const Tolerance& tol,
                   double float64_rmse) {
  Comparison c;
  if (!actual.defined() || !expected.defined()) {
    c.pass = actual.defined() == expected.defined();
    if (!c.pass) c.problem = "got " + describe(actual) + ", expected " + describe(expected);
    return c;
  }
  if (actual.scalar_type() != expected.scalar_type() || actual.sizes() != expected.sizes()) {
    c.problem = "got " + describe(actual) + ", expected " + describe(expected);
    c.max_abs = c.max_rel = std::numeric_limits<double>::infinity();
    return c;
  }
  if (actual.numel() == 0) {
    c.pass = true;
    return c;
  }
  at::Tensor a = actual.detach().to(at::kCPU);
  at::Tensor e = expected.detach().to(at::kCPU);
  if (a.is_complex()) {
    a = at::view_as_real(a.resolve_conj());
    e = at::view_as_real(e.resolve_conj());
  }
  if (!a.is_floating_point()) {  // integers and bool: exact
    at::Tensor ad = a.to(at::kDouble), ed = e.to(at::kDouble);
    at::Tensor diff = (ad - ed).abs();
    c.max_abs = diff.max().item<double>();
    c.max_rel = (diff / ed.abs()).nan_to_num(0.0, kInf, -kInf).max().item<double>();
    c.pass = at::equal(a, e);
  } else {
    a = a.to(at::kDouble);
    e = e.to(at::kDouble);
    // equal values (matching infinities included), and NaN where the reference has NaN
    at::Tensor equal = a.eq(e).logical_or(a.isnan().logical_and(e.isnan()));
    at::Tensor diff = (a - e).abs().masked_fill(equal, 0.0);
    at::Tensor close = equal.logical_or(diff.le(tol.atol + tol.rtol * e.abs()));
    c.pass = close.all().item<bool>();
    c.max_abs = diff.nan_to_num(kInf, kInf, -kInf).max().item<double>();
    at::Tensor rel = diff / e.abs();  // 0/0 -> nan (equal), x/0 -> inf
    c.max_rel = rel.masked_fill(equal, 0.0).nan_to_num(kInf, kInf, -kInf).max().item<double>();
    if (!c.pass && std::isfinite(float64_rmse)) {
      const double rmse = (a - e).pow(2).mean().sqrt().item<double>();
      const double bound = (kFloat64Multiplier - 1.0) * float64_rmse + tol.atol / 10.0;
      auto sci = [](double v) {
        std::ostringstream os;
        os << std::scientific << std::setprecision(2) << v;
        return os.str();
      };
      std::ostringstream msg;
      msg << "rmse " << sci(rmse) << (rmse <= bound ? " <= " : " > ") << sci(bound) << " = "
          << (kFloat64Multiplier - 1.0) << " x eager float32's rmse from float64 ("
          << sci(float64_rmse) << ") + atol/10";
      if (rmse <= bound) {  // NaN fails
        c.pass = c.by_float64 = true;
        c.problem = "float64 rule: " + msg.str();
        return c;
      }
      std::ostringstream fail;
      fail << "not close (rtol " << tol.rtol << ", atol " << tol.atol << "), float64 rule: "
           << msg.str();
      c.problem = fail.str();
      return c;
    }
  }
  if (!c.pass) {
    std::ostringstream msg;
    msg << "not close (rtol " << tol.rtol << ", atol " << tol.atol << ")";
    c.problem = msg.str();
  }
  return c;
}

}  // namespace pt2rt::cli
