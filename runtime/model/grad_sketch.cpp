// runtime/model/grad_sketch.cpp — gradient sketches (definition in pt2rt/grad_sketch.h).
#include "pt2rt/grad_sketch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "core/tensor_format.h"
#include "pt2rt/constants.h"

namespace pt2rt {
namespace {

constexpr uint32_t kGolden = 0x9E3779B9u;
constexpr double kEps64 = 2.220446049250313e-16;  // 2^-52
constexpr double kProjectionSigmas = 6.0;

uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

uint32_t key(uint32_t seed, uint32_t k) { return lowbias32(seed + (k + 1) * kGolden); }

std::string number(double v) {
  std::ostringstream out;
  out.precision(6);
  out << std::scientific << v;
  return out.str();
}

}  // namespace

int grad_sketch_sign(uint32_t seed, uint32_t k, uint32_t j) {
  return (lowbias32(j ^ key(seed, k)) >> 31) == 0 ? 1 : -1;
}

GradSketch compute_grad_sketch(const std::string& name, const at::Tensor& grad, uint32_t seed,
                               size_t projections) {
  if (!grad.defined() || !c10::isFloatingType(grad.scalar_type())) {
    throw std::invalid_argument("gradient sketch of '" + name + "': needs a real floating tensor");
  }
  if (static_cast<uint64_t>(grad.numel()) >= kGradSketchMaxNumel) {
    throw std::invalid_argument("gradient sketch of '" + name + "': 2^32 elements or more");
  }
  GradSketch s;
  s.name = name;
  s.dtype = grad.scalar_type();
  s.sizes = grad.sizes().vec();
  const at::Tensor g = grad.detach().to(at::kCPU, at::kDouble).contiguous();
  const double* data = g.data_ptr<double>();
  const auto n = static_cast<uint32_t>(g.numel());
  std::vector<uint32_t> keys(projections);
  for (size_t k = 0; k < projections; ++k) keys[k] = key(seed, static_cast<uint32_t>(k));
  s.projections.assign(projections, 0.0);
  double sq = 0.0;
  for (uint32_t j = 0; j < n; ++j) {
    const double v = data[j];
    sq += v * v;
    s.sum += v;
    s.abs_sum += std::fabs(v);
    // max that propagates NaN (std::max would drop it and let a NaN gradient pass)
    if (!(std::fabs(v) <= s.max_abs)) s.max_abs = std::fabs(v);
    for (size_t k = 0; k < projections; ++k) {
      s.projections[k] += (lowbias32(j ^ keys[k]) >> 31) == 0 ? v : -v;
    }
  }
  s.norm = std::sqrt(sq);
  return s;
}

GradSketchCheck check_grad_sketch(const at::Tensor& grad, const GradSketch& reference,
                                  uint32_t seed, double rtol, double atol) {
  GradSketchCheck c;
  if (!grad.defined()) {
    c.problem = "undefined gradient";
    return c;
  }
  if (grad.scalar_type() != reference.dtype || grad.sizes().vec() != reference.sizes) {
    c.problem = "got " + describe_tensor_type(grad.scalar_type(), grad.sizes()) +
                ", reference " + describe_tensor_type(reference.dtype, reference.sizes);
    return c;
  }
  const GradSketch a =
      compute_grad_sketch(reference.name, grad, seed, reference.projections.size());
  const auto n = static_cast<double>(grad.numel());
  const double r = n * kEps64 * reference.abs_sum;
  const double l2 = atol * std::sqrt(n) + rtol * reference.norm;
  // The float64 sketch, where recorded and of the same shape (validate.cpp checks that).
  const GradSketch* f64 = reference.float64 && reference.float64->sizes == reference.sizes &&
                                  reference.float64->projections.size() == a.projections.size()
                              ? reference.float64.get()
                              : nullptr;
  // D = ||reference - float64||_2: eager float32's own distance from float64.
  const double d = std::sqrt(n) * reference.float64_rmse;
  struct Stat {
    std::string what;
    double actual, expected, tol, float64, reach;  ///< reach: the statistic's change per unit L2
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<Stat> stats = {
      {"norm", a.norm, reference.norm, l2 + r, f64 ? f64->norm : nan, 1.0},
      {"sum", a.sum, reference.sum, atol * n + rtol * reference.abs_sum + r, f64 ? f64->sum : nan,
       std::sqrt(n)},
      {"abs_sum", a.abs_sum, reference.abs_sum, atol * n + rtol * reference.abs_sum + r,
       f64 ? f64->abs_sum : nan, std::sqrt(n)},
      {"max_abs", a.max_abs, reference.max_abs, atol + rtol * reference.max_abs + r,
       f64 ? f64->max_abs : nan, 1.0}};
  for (size_t k = 0; k < a.projections.size(); ++k) {
    stats.push_back({"projection " + std::to_string(k), a.projections[k],
                     reference.projections[k], kProjectionSigmas * l2 + r,
                     f64 ? f64->projections[k] : nan, kProjectionSigmas});
  }
  c.pass = true;
  for (const Stat& s : stats) {
    // Equal non-finite statistics (a gradient with NaNs, or the same infinity, in both) are
    // equal, as torch.testing.assert_close(equal_nan=True) calls equal NaNs and infinities; a
    // sketch cannot say where the NaNs are, only that both have them.
    if (!std::isfinite(s.actual) && !std::isfinite(s.expected) &&
        (std::isnan(s.actual) ? std::isnan(s.expected) : s.actual == s.expected)) {
      continue;
    }
    const double diff = std::fabs(s.actual - s.expected);
    const double rel = diff == 0.0 ? 0.0
                       : s.expected == 0.0 ? std::numeric_limits<double>::infinity()
                                           : diff / std::fabs(s.expected);
    // NaN compares false: a NaN statistic makes both the maxima and the check fail
    if (!(diff <= c.max_abs)) c.max_abs = diff;
    if (!(rel <= c.max_rel)) c.max_rel = rel;
    if (diff <= s.tol) continue;
    // The float64 rule (NaN in any of its terms fails it), for a reference that agrees with
    // its own float64 record (the statistic of a gradient D from float64 in L2 moves by at
    // most reach * D).
    const double res_error = std::fabs(s.actual - s.float64);
    const double bound = kFloat64Multiplier * s.reach * d + s.tol / 10.0;
    const bool consistent = std::fabs(s.expected - s.float64) <= s.reach * d + s.tol / 10.0;
    if (consistent && res_error <= bound) {
      c.by_float64 = true;
      continue;
    }
    if (c.pass) {
      c.pass = false;
      c.problem = "sketch " + s.what + " " + number(s.actual) + ", reference " +
                  number(s.expected) + " (|diff| " + number(diff) + " > tol " + number(s.tol) +
                  (std::isnan(s.float64) ? std::string(")")
                                         : "; float64 rule: |diff from float64| " +
                                               number(res_error) + " > " + number(bound) + ")");
    }
  }
  return c;
}

}  // namespace pt2rt
