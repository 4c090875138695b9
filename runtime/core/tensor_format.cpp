// runtime/core/tensor_format.cpp — see tensor_format.h.
#include "core/tensor_format.h"

#include <sstream>

namespace pt2rt {

std::string describe_tensor_type(c10::ScalarType dtype, c10::IntArrayRef sizes) {
  std::ostringstream os;
  os << dtype_name(dtype) << '[';
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  os << ']';
  return os.str();
}

std::string describe_ivalue(const c10::IValue& v) {
  std::ostringstream os;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) return "undefined tensor";
    os << describe_tensor_type(t.scalar_type(), t.sizes()) << " on " << t.device().str();
    return os.str();
  }
  if (v.isTensorList()) {
    auto list = v.toTensorList();
    os << "Tensor[] (" << list.size() << " tensors";
    for (size_t i = 0; i < list.size() && i < 4; ++i) {
      os << (i ? ", " : ": ") << describe_ivalue(c10::IValue(list.get(i)));
    }
    if (list.size() > 4) os << ", ...";
    os << ')';
    return os.str();
  }
  if (v.isNone()) return "None";
  if (v.isList()) {
    auto list = v.toListRef();
    os << "list (" << list.size() << " items";
    for (size_t i = 0; i < list.size() && i < 4; ++i) {
      os << (i ? ", " : ": ") << describe_ivalue(list[i]);
    }
    if (list.size() > 4) os << ", ...";
    os << ')';
    return os.str();
  }
  os << v.tagKind() << ' ' << v;
  return os.str();
}

}  // namespace pt2rt
