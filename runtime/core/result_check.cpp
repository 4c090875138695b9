// runtime/core/result_check.cpp — see result_check.h.
#include "core/result_check.h"

#include "core/sym_eval.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <climits>
#include <sstream>

#include "core/tensor_format.h"

namespace pt2rt {
namespace {

std::string check_tensor(const at::Tensor& t) {
  if (!t.defined()) return "";
  if (t.layout() != c10::kStrided || t.is_quantized() || t.is_mkldnn() || t.is_nested()) {
    std::ostringstream os;
    os << "has layout " << t.layout() << (t.is_quantized() ? " (quantized)" : "")
       << (t.is_nested() ? " (nested)" : "") << "; only strided, dense tensors are supported";
    return os.str();
  }
  if (t.numel() == 0) return "";
  if (!t.has_storage()) return "has no storage";
  // Offset of the last element reachable from the view, in elements, with checked arithmetic.
  int64_t last = t.storage_offset();
  bool overflow = last < 0;
  for (int64_t d = 0; d < t.dim() && !overflow; ++d) {
    int64_t span = 0;
    if (t.stride(d) < 0) return "has a negative stride";
    overflow = __builtin_mul_overflow(t.size(d) - 1, t.stride(d), &span) ||
               __builtin_add_overflow(last, span, &last);
  }
  uint64_t end = 0;  // bytes up to the end of the last element
  if (overflow ||
      __builtin_mul_overflow(static_cast<uint64_t>(last) + 1, t.element_size(), &end) ||
      end > t.storage().nbytes()) {
    std::ostringstream os;
    os << "is a view of sizes " << t.sizes() << ", strides " << t.strides() << " and offset "
       << t.storage_offset() << " that reaches past the " << t.storage().nbytes()
       << " bytes of its storage";
    return os.str();
  }
  return "";
}

}  // namespace

std::string check_storage(const c10::IValue& result) {
  if (result.isTensor()) return check_tensor(result.toTensor());
  if (result.isTensorList()) {
    for (const at::Tensor& t : result.toTensorVector()) {
      std::string p = check_tensor(t);
      if (!p.empty()) return "(list element) " + p;
    }
  } else if (result.isList()) {
    for (const c10::IValue& e : result.toListRef()) {
      if (!e.isTensor()) continue;
      std::string p = check_tensor(e.toTensor());
      if (!p.empty()) return "(list element) " + p;
    }
  }
  return "";
}

int64_t largest_tensor_numel(const std::vector<c10::IValue>& args) {
  int64_t most = 0;
  auto see = [&](const c10::IValue& v) {
    if (v.isTensor() && v.toTensor().defined()) most = std::max(most, v.toTensor().numel());
  };
  for (const c10::IValue& a : args) {
    if (a.isList()) {
      for (const c10::IValue& e : a.toListRef()) see(e);
    } else {
      see(a);
    }
  }
  return most;
}

std::string check_result(const Value& value, const c10::IValue& result, CheckAt at,
                         const std::vector<int64_t>* symbols, int64_t largest_argument) {
  const bool at_hints = at == CheckAt::Load;
  std::string problem = check_storage(result);
  if (!problem.empty()) return problem;
  if (value.kind != ValueKind::Tensor) return "";
  if (!result.isTensor()) {
    return result.isNone() ? "" : "is a " + result.tagKind() + ", the archive declares a Tensor";
  }
  const at::Tensor& t = result.toTensor();
  if (!t.defined()) return "";
  if (!value.meta) {
    return at == CheckAt::Run ? "is a " + describe_ivalue(result) +
                                    ", the archive declares none (an undefined tensor)"
                              : "";
  }
  const TensorMeta& m = *value.meta;
  auto declared_at = [&](const Dim& d) -> int64_t {
    if (d.is_static() || !symbols) return d.value;
    return dim_value(d, *symbols).value_or(-1);
  };
  if (value.device_dependent_shape) {
    int64_t declared_numel = 1;
    for (const Dim& d : m.sizes) {
      if (__builtin_mul_overflow(declared_numel, std::max<int64_t>(declared_at(d), 0),
                                 &declared_numel)) {
        declared_numel = INT64_MAX;
      }
    }
    if (t.scalar_type() != m.dtype) {
      return "is " + describe_tensor_type(t.scalar_type(), t.sizes()) + ", the archive declares " +
             std::string(c10::toString(m.dtype)) + " (a result whose shape depends on the device)";
    }
    const int64_t bound = std::max(declared_numel, largest_argument);
    if (t.numel() > bound) {
      return "is " + describe_tensor_type(t.scalar_type(), t.sizes()) + " (" +
             std::to_string(t.numel()) + " elements), more than a result whose shape depends on " +
             "the device may have: " + std::to_string(bound) +
             " (the declared elements or the node's largest tensor argument)";
    }
    return "";
  }
  bool same = t.scalar_type() == m.dtype && t.dim() == static_cast<int64_t>(m.sizes.size());
  for (size_t d = 0; same && d < m.sizes.size(); ++d) {
    same = (!at_hints && !m.sizes[d].is_static()) ||
           t.size(static_cast<int64_t>(d)) == declared_at(m.sizes[d]);
  }
  if (same) return "";
  std::vector<int64_t> declared;
  for (const Dim& d : m.sizes) declared.push_back(declared_at(d));
  return "is " + describe_tensor_type(t.scalar_type(), t.sizes()) + ", the archive declares " +
         describe_tensor_type(m.dtype, declared);
}

}  // namespace pt2rt
