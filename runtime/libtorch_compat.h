// runtime/libtorch_compat.h — the LibTorch 1.13 / 2.x differences the runtime depends on, in
// one place (STYLE.md: narrow seams, no TORCH_VERSION checks spread through the code).
//
//   * c10::Allocator: 1.13 declares `DataPtr allocate(size_t) const`; 2.x makes it non-const
//     and adds the pure virtual `copy_data` and the virtual `is_simple_data_ptr`.
//   * c10::TypeKind::SymBoolType exists in 2.x only.
#pragma once

#include <ATen/core/jit_type_base.h>
#include <c10/core/Allocator.h>
#include <torch/csrc/api/include/torch/version.h>

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
