// runtime/core/libtorch_compat.cpp — see libtorch_compat.h.
#include "core/libtorch_compat.h"

#include <ATen/core/Tensor.h>
#include <ATen/native/ConvUtils.h>
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 5)
#include <ATen/ops/scaled_dot_product_attention.h>
#define PT2RT_HAS_SDPA 1
#endif
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
#include <ATen/ops/_foreach_copy.h>
#define PT2RT_HAS_FOREACH_COPY 1
#endif

namespace pt2rt {

bool aten_picks_onednn(const at::Tensor& input, const at::Tensor& weight,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& dilation, int64_t groups) {
  const std::vector<int64_t> output_padding(stride.size(), 0);
#if TORCH_VERSION_MAJOR >= 2
  const at::native::ConvBackend backend = at::native::select_conv_backend(
      input, weight, /*bias_opt=*/std::nullopt, c10::fromIntArrayRefSlow(stride),
      c10::fromIntArrayRefSlow(padding), c10::fromIntArrayRefSlow(dilation),
      /*transposed=*/false, c10::fromIntArrayRefSlow(output_padding), c10::SymInt(groups),
      /*bias_sizes_opt=*/std::nullopt);
#else
  const at::native::ConvBackend backend = at::native::select_conv_backend(
      input, weight, /*bias_opt=*/c10::nullopt, stride, padding, dilation,
      /*transposed=*/false, output_padding, groups);
#endif
  return backend == at::native::ConvBackend::Mkldnn;
}

std::optional<at::Tensor> aten_scaled_dot_product_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask, bool is_causal, std::optional<double> scale,
    bool enable_gqa) {
#ifdef PT2RT_HAS_SDPA
  return at::scaled_dot_product_attention(query, key, value, attn_mask, /*dropout_p=*/0.0,
                                          is_causal, scale, enable_gqa);
#else
  (void)query, (void)key, (void)value, (void)attn_mask, (void)is_causal, (void)scale,
      (void)enable_gqa;
  return std::nullopt;
#endif
}

void foreach_copy(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src) {
#ifdef PT2RT_HAS_FOREACH_COPY
  at::_foreach_copy_(dst, src);
#else
  for (size_t i = 0; i < dst.size() && i < src.size(); ++i) dst[i].copy_(src[i]);
#endif
}

}  // namespace pt2rt
