// runtime/core/libtorch_compat.h — the LibTorch 1.13 / 2.x differences the
// runtime depends on, in one place (STYLE.md: narrow seams, no TORCH_VERSION checks spread through
// the code).
//
//   * c10::Allocator: 1.13 declares `DataPtr allocate(size_t) const`; 2.x makes it non-const
//     and adds the pure virtual `copy_data` and the virtual `is_simple_data_ptr`.
//   * c10::TypeKind::SymBoolType exists in 2.x only.
//   * at::scaled_dot_product_attention exists from 2.0, with enable_gqa from 2.5.
//   * at::_foreach_copy_ exists from 2.2.
//   * at::native::select_conv_backend takes int lists in 1.13, SymInt lists and the bias
//     sizes in 2.x (libtorch_compat.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/jit_type_base.h>
#include <c10/core/Allocator.h>
#include <torch/csrc/api/include/torch/version.h>

#include <optional>
#include <vector>

namespace pt2rt {

/// True for 2.x's SymBool schema type (`-> SymBool`); 1.13 has none.
inline bool is_sym_bool_type(c10::TypeKind k) {
#if TORCH_VERSION_MAJOR >= 2
  return k == c10::TypeKind::SymBoolType;
#else
  (void)k;
  return false;
#endif
}

/// Whether ATen's convolution would run a float32 CPU convolution of these tensors' sizes
/// through oneDNN (at::native::select_conv_backend() == ConvBackend::Mkldnn; not transposed,
/// no bias sizes: a bias does not change the choice), at the current intra-op thread count.
/// Only the tensors' metadata is read.
bool aten_picks_onednn(const at::Tensor& input, const at::Tensor& weight,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& dilation, int64_t groups);

/// ATen's dispatching at::scaled_dot_product_attention(query, key, value, attn_mask,
/// dropout_p = 0, is_causal, scale, enable_gqa) — the fused kernel eager PyTorch picks for these
/// tensors — or nullopt on a LibTorch before 2.5 (1.13 has no SDPA; 2.5 added enable_gqa).
/// Throws c10::Error as ATen does for arguments it rejects.
std::optional<at::Tensor> aten_scaled_dot_product_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask, bool is_causal, std::optional<double> scale,
    bool enable_gqa);

/// dst[i].copy_(src[i]) for all i as ONE at::_foreach_copy_ (LibTorch >= 2.2), else one
/// Tensor::copy_ each. Pairs must have equal sizes (c10::Error otherwise).
void foreach_copy(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src);

/// An allocator that forwards everything to `inner` after calling before_allocate(n), which
/// may throw (a c10::Error, as an out-of-memory would) to refuse the allocation.
class ForwardingAllocator : public c10::Allocator {
 public:
  explicit ForwardingAllocator(c10::Allocator* inner) : inner_(inner) {}
#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override {
    before_allocate(n);
    return inner_->allocate(n);
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    inner_->copy_data(dest, src, count);
  }
  bool is_simple_data_ptr(const c10::DataPtr& data_ptr) const override {
    return inner_->is_simple_data_ptr(data_ptr);
  }
#else
  c10::DataPtr allocate(size_t n) const override {
    before_allocate(n);
    return inner_->allocate(n);
  }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return inner_->raw_deleter(); }

 protected:
  virtual void before_allocate(size_t n) const = 0;

 private:
  c10::Allocator* inner_;
};

}  // namespace pt2rt
