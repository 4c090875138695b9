// runtime/core/batched_copy.cpp — see batched_copy.h.
#include "core/batched_copy.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/util/Exception.h>

#include "core/libtorch_compat.h"

namespace pt2rt {

void copy_all(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src) {
  TORCH_CHECK(dst.size() == src.size(), "pt2rt copy_all: ", dst.size(), " destinations for ",
              src.size(), " sources");
  std::vector<at::Tensor> batch_dst, batch_src;
  for (size_t i = 0; i < dst.size(); ++i) {
    const at::Tensor& d = dst[i];
    const at::Tensor& s = src[i];
    if (!d.defined() || !s.defined()) continue;
    const bool batchable = d.device() == s.device() && d.scalar_type() == s.scalar_type() &&
                           d.sizes() == s.sizes() && d.strides() == s.strides() &&
                           d.is_non_overlapping_and_dense() &&
                           (batch_dst.empty() ||
                            (d.device() == batch_dst[0].device() &&
                             d.scalar_type() == batch_dst[0].scalar_type()));
    if (batchable) {
      batch_dst.push_back(d);
      batch_src.push_back(s);
    } else {
      d.copy_(s);
    }
  }
  // Even one pair: on CUDA a kernel launch costs the host less than a cudaMemcpyAsync.
  if (!batch_dst.empty()) foreach_copy(batch_dst, batch_src);
}

std::vector<at::Tensor> clone_all(const std::vector<at::Tensor>& src) {
  std::vector<at::Tensor> out(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    const at::Tensor& s = src[i];
    if (!s.defined()) continue;
    out[i] = s.is_non_overlapping_and_dense()
                 ? at::empty_strided(s.sizes(), s.strides(), s.options())
                 : at::empty(s.sizes(), s.options());
  }
  copy_all(out, src);
  return out;
}

}  // namespace pt2rt
