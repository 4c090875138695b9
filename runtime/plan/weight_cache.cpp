// runtime/plan/weight_cache.cpp — see weight_cache.h.
#include "plan/weight_cache.h"

namespace pt2rt {

bool WeightCache::stamp(const std::vector<c10::IValue>& slots,
                        const std::vector<ValueId>& input_slots, std::vector<Stamp>& out) {
  out.clear();
  out.reserve(input_slots.size());
  for (ValueId v : input_slots) {
    const c10::IValue& iv = slots[v];
    if (!iv.isTensor()) return false;
    const at::Tensor& t = iv.toTensor();
    if (!t.defined() || t.is_inference()) return false;
    const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
    out.push_back(Stamp{impl, impl->version_counter().current_version(), t.data_ptr()});
  }
  return true;
}

bool WeightCache::matches(const Snapshot& s, const std::vector<c10::IValue>& slots,
                          const std::vector<ValueId>& input_slots) {
  for (size_t i = 0; i < input_slots.size(); ++i) {
    const c10::IValue& iv = slots[input_slots[i]];
    if (!iv.isTensor()) return false;
    const at::Tensor& t = iv.toTensor();
    const Stamp& st = s.stamps[i];
    if (t.unsafeGetTensorImpl() != st.impl || t.is_inference() ||
        t.unsafeGetTensorImpl()->version_counter().current_version() != st.version ||
        t.data_ptr() != st.data) {
      return false;
    }
  }
  return true;
}

}  // namespace pt2rt
