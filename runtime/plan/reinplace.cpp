// runtime/plan/reinplace.cpp — in-place twins of elementwise ops (see reinplace.h).
#include "plan/reinplace.h"

#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <map>
#include <string>
#include <utility>

namespace pt2rt {
namespace {

struct TwinSpec {
  const char* name;      ///< in-place op
  const char* overload;
  bool binary;
  bool floating_only;
};

/// (out-of-place name, overload) -> its in-place twin.
const std::map<std::pair<std::string, std::string>, TwinSpec>& twin_table() {
  static const std::map<std::pair<std::string, std::string>, TwinSpec> table{
      {{"aten::relu", ""}, {"aten::relu_", "", false, false}},
      {{"aten::hardtanh", ""}, {"aten::hardtanh_", "", false, true}},
      {{"aten::silu", ""}, {"aten::silu_", "", false, true}},
      {{"aten::hardswish", ""}, {"aten::hardswish_", "", false, true}},
      {{"aten::sigmoid", ""}, {"aten::sigmoid_", "", false, true}},
      {{"aten::tanh", ""}, {"aten::tanh_", "", false, true}},
      {{"aten::add", "Tensor"}, {"aten::add_", "Tensor", true, true}},
      {{"aten::sub", "Tensor"}, {"aten::sub_", "Tensor", true, true}},
      {{"aten::mul", "Tensor"}, {"aten::mul_", "Tensor", true, true}},
      {{"aten::div", "Tensor"}, {"aten::div_", "Tensor", true, true}},
  };
  return table;
}

bool sole_owner(const at::Tensor& t) {
  return t.defined() && t.layout() == c10::kStrided && t.has_storage() && t.use_count() == 1 &&
         t.storage().use_count() == 1;
}

}  // namespace

std::optional<InplaceTwin> inplace_twin(const c10::OperatorHandle& op) {
  const c10::OperatorName& name = op.operator_name();
  const auto& table = twin_table();
  const auto it = table.find({name.name, name.overload_name});
  if (it == table.end()) return std::nullopt;
  const TwinSpec& spec = it->second;
  auto twin = c10::Dispatcher::singleton().findSchema({spec.name, spec.overload});
  if (!twin) return std::nullopt;
  return InplaceTwin{*twin, spec.binary, spec.floating_only};
}

bool can_run_in_place(const InplaceTwin& twin, const c10::IValue& self, const c10::IValue* other) {
  if (!self.isTensor() || c10::GradMode::is_enabled()) return false;
  const at::Tensor& t = self.toTensor();
  if (!sole_owner(t) || t.requires_grad() || !t.is_contiguous()) return false;
  if (t.is_inference() && !c10::InferenceMode::is_enabled()) return false;
  if (twin.floating_only && !t.is_floating_point()) return false;
  if (!twin.binary) return true;
  if (other == nullptr || !other->isTensor()) return false;
  const at::Tensor& o = other->toTensor();
  if (!o.defined() || o.layout() != c10::kStrided || o.scalar_type() != t.scalar_type() ||
      o.device() != t.device() || o.requires_grad()) {
    return false;
  }
  if (o.dim() == 0) return true;
  return o.sizes() == t.sizes() && o.strides() == t.strides();
}

}  // namespace pt2rt
