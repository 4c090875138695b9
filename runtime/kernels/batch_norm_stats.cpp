// runtime/kernels/batch_norm_stats.cpp — see batch_norm_stats.h.
#include "kernels/batch_norm_stats.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <optional>
#include <string>
#include <tuple>


namespace pt2rt {
namespace {

/// The group as the graph writes it (the fallback, and the reference the fusion must
/// reproduce for out / save_mean / save_invstd); `factor` 0: the variance pass.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> as_written(
    const at::Tensor& x, const c10::optional<at::Tensor>& weight,
    const c10::optional<at::Tensor>& bias, const at::Tensor& running_mean,
    const at::Tensor& running_var, double momentum, double eps, double factor) {
  auto [out, mean, invstd] =
      at::native_batch_norm(x, weight, bias, c10::nullopt, c10::nullopt, true, momentum, eps);
  at::Tensor new_mean = at::lerp(running_mean, mean, momentum);
  at::Tensor unbiased;
  if (factor == 0) {
    std::vector<int64_t> dims{0};  // every dim but the channels
    for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
    unbiased = at::var(x, dims, /*unbiased=*/true, /*keepdim=*/false);
  } else {
    unbiased = at::mul(at::sub(at::pow(invstd, -2), eps), factor);
  }
  at::Tensor new_var = at::lerp(running_var, unbiased, momentum);
  return {out, mean, invstd, new_mean, new_var};
}


bool is_stat_of(const at::Tensor& stat, const at::Tensor& x) {
  return stat.defined() && stat.scalar_type() == x.scalar_type() && stat.device() == x.device() &&
         stat.layout() == c10::kStrided && stat.dim() == 1 && x.dim() >= 2 &&
         stat.size(0) == x.size(1);
}

bool shares_storage(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.has_storage() && b.has_storage() &&
         a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
}

void batch_norm_with_stats_kernel(torch::jit::Stack& s) {
  bool in_place = s[8].toBool();
  const double factor = s[7].toDouble(), eps = s[6].toDouble(), momentum = s[5].toDouble();
  const at::Tensor running_var = s[4].toTensor(), running_mean = s[3].toTensor();
  const c10::optional<at::Tensor> bias = s[2].toOptional<at::Tensor>();
  const c10::optional<at::Tensor> weight = s[1].toOptional<at::Tensor>();
  const at::Tensor x = s[0].toTensor();
  s.clear();
  const int64_t n = batch_norm_per_channel(x.sizes());
  const bool fits = (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) &&
                    is_stat_of(running_mean, x) && is_stat_of(running_var, x) && n > 1 &&
                    (factor == 0 || static_cast<double>(n) / static_cast<double>(n - 1) == factor);
  if (!fits) {
    auto [out, mean, invstd, new_mean, new_var] =
        as_written(x, weight, bias, running_mean, running_var, momentum, eps, factor);
    s.insert(s.end(), {out, mean, invstd, new_mean, new_var});
    return;
  }
  // In place only on statistics no other argument sees (tied or aliased tensors bound to
  // different inputs at run time: the kernel would read what it already wrote).
  for (const at::Tensor& other : {x, weight.value_or(at::Tensor()), bias.value_or(at::Tensor())}) {
    in_place = in_place && !shares_storage(running_mean, other) && !shares_storage(running_var, other);
  }
  in_place = in_place && !shares_storage(running_mean, running_var);
  at::Tensor new_mean = in_place ? running_mean : running_mean.clone();
  at::Tensor new_var = in_place ? running_var : running_var.clone();
  auto [out, mean, invstd] =
      at::native_batch_norm(x, weight, bias, new_mean, new_var, true, momentum, eps);
  if (in_place) {
    // The kernel writes through the data pointer; the version counters must say so (the
    // weight cache keys on them) even if the call fails before the copy-back bumps them.
    new_mean.unsafeGetTensorImpl()->bump_version();
    new_var.unsafeGetTensorImpl()->bump_version();
  }
  s.insert(s.end(), {out, mean, invstd, new_mean, new_var});
}

}  // namespace

int64_t batch_norm_per_channel(c10::IntArrayRef sizes) {
  const int64_t numel = c10::multiply_integers(sizes);
  return sizes.size() > 1 ? (sizes[1] == 0 ? 0 : numel / sizes[1]) : numel;
}

const NativeOp& batch_norm_with_stats_op() {
  static const NativeOp op{
      torch::jit::parseSchema(
          "pt2rt::batch_norm_with_stats(Tensor input, Tensor? weight, Tensor? bias, "
          "Tensor running_mean, Tensor running_var, float momentum, float eps, "
          "float unbiased_factor, bool update_in_place) -> "
          "(Tensor, Tensor, Tensor, Tensor, Tensor)"),
      &batch_norm_with_stats_kernel};
  return op;
}

}  // namespace pt2rt
