// tests/cpp/runtime/assert_close.cpp — see assert_close.h.
#include "assert_close.h"

#include <ATen/ATen.h>

#include <sstream>

namespace pt2rt::test {

std::pair<double, double> default_tolerances(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Half: return {1e-3, 1e-5};
    case c10::ScalarType::BFloat16: return {1.6e-2, 1e-5};
    case c10::ScalarType::Float: return {1.3e-6, 1e-5};
    case c10::ScalarType::Double: return {1e-7, 1e-7};
    case c10::ScalarType::ComplexHalf: return {1e-3, 1e-5};
    case c10::ScalarType::ComplexFloat: return {1.3e-6, 1e-5};
    case c10::ScalarType::ComplexDouble: return {1e-7, 1e-7};
    default: return {0.0, 0.0};
  }
}

Closeness assert_close(const at::Tensor& actual, const at::Tensor& expected,
                       std::optional<double> rtol, std::optional<double> atol) {
  Closeness r;
  std::ostringstream os;
  if (!actual.defined() || !expected.defined()) {
    r.ok = actual.defined() == expected.defined();
    if (!r.ok) r.message = "one tensor is undefined";
    return r;
  }
  if (actual.sizes() != expected.sizes()) {
    os << "shape mismatch: " << actual.sizes() << " vs " << expected.sizes();
    r.message = os.str();
    return r;
  }
  if (actual.scalar_type() != expected.scalar_type()) {
    os << "dtype mismatch: " << actual.scalar_type() << " vs " << expected.scalar_type();
    r.message = os.str();
    return r;
  }
  auto tol = default_tolerances(expected.scalar_type());
  const double rt = rtol.value_or(tol.first), at_ = atol.value_or(tol.second);
  at::Tensor a = actual.detach().to(at::kCPU), e = expected.detach().to(at::kCPU);
  if (a.is_complex()) {
    a = at::view_as_real(a.resolve_conj());
    e = at::view_as_real(e.resolve_conj());
  }
  a = a.to(at::kDouble);
  e = e.to(at::kDouble);
  if (a.numel() == 0) {
    r.ok = true;
    return r;
  }
  at::Tensor diff = (a - e).abs();
  at::Tensor allowed = at_ + rt * e.abs();
  at::Tensor bad = (diff > allowed) | diff.isnan();
  // NaN in both at the same place is still a mismatch (equal_nan=False).
  r.max_abs_error = diff.max().item<double>();
  int64_t n_bad = bad.sum().item<int64_t>();
  r.ok = n_bad == 0;
  if (!r.ok) {
    os << n_bad << " / " << a.numel() << " elements not close (rtol " << rt << ", atol " << at_
       << "); greatest absolute difference " << r.max_abs_error;
    r.message = os.str();
  }
  return r;
}

}  // namespace pt2rt::test
