// runtime/plan/op_policy.cpp — see op_policy.h.
#include "plan/op_policy.h"

#include <ATen/core/jit_type.h>

#include <algorithm>

#include "core/libtorch_compat.h"

namespace pt2rt {
namespace {

using c10::TypeKind;
using c10::TypePtr;

// Rule 1. Operators that every schema rule below would let through, yet are not functional in
// the sense that matters here: they reach outside the process's own tensors, or build tensors
// whose invariants no kernel checks afterwards. Matched by "aten::name" (every overload).
const std::vector<std::pair<std::string, std::string>> kDenied = {
    {"aten::from_file", "maps or reads a file named by the archive"},
    {"aten::_copy_from", "writes into its argument 'dst' although its schema does not say so"},
    {"aten::_copy_from_and_resize",
     "writes into and resizes its argument 'dst' although its schema does not say so"},
    {"aten::_index_put_impl", "takes an 'unsafe' flag that skips index checks"},
    {"aten::_sparse_coo_tensor_unsafe", "builds a sparse tensor without checking its indices"},
    {"aten::_sparse_compressed_tensor_unsafe",
     "builds a sparse tensor without checking its indices"},
    {"aten::_sparse_csr_tensor_unsafe", "builds a sparse tensor without checking its indices"},
    {"aten::_sparse_csc_tensor_unsafe", "builds a sparse tensor without checking its indices"},
    {"aten::_sparse_bsr_tensor_unsafe", "builds a sparse tensor without checking its indices"},
    {"aten::_sparse_bsc_tensor_unsafe", "builds a sparse tensor without checking its indices"},
    {"aten::_unsafe_index", "indexes without bounds checks"},
    {"aten::_unsafe_masked_index", "indexes without bounds checks"},
    {"aten::_unsafe_index_put", "indexes without bounds checks"},
    {"aten::_unsafe_masked_index_put_accumulate", "indexes without bounds checks"},
    {"aten::_nested_view_from_buffer", "views a buffer at offsets it does not check"},
    {"aten::_nested_view_from_buffer_copy", "views a buffer at offsets it does not check"},
    {"aten::_nested_view_from_jagged", "views a buffer at offsets it does not check"},
    {"aten::_nested_view_from_jagged_copy", "views a buffer at offsets it does not check"},
};

// Rule 4's exception: operators that return nothing but only check a condition and raise an
// error when it fails — what torch.export and AOTAutograd emit for runtime asserts on sizes.
// (`_assert_async` is not among them: on CUDA it is a device-side assert that ends the
// process's CUDA context.)
const std::vector<std::string> kChecks = {"aten::_assert_scalar", "aten::_assert_tensor_metadata",
                                          "aten::sym_constrain_range",
                                          "aten::sym_constrain_range_for_size"};

// Rule 8. The names ATen gives `str` arguments that select a mode of a kernel (an enum spelled
// as text), collected from the schemas of LibTorch 1.13 and 2.x, plus `assert_msg` (the message
// of a functional assert, only shown in the error it raises). Any other `str` argument —
// `filename`, free text the kernel interprets — refuses the operator.
const std::vector<std::string> kModeSelectors = {"assert_msg", 
    "UPLO",  "approximate", "compute_mode", "driver",   "equation", "indexing",
    "interpolation", "mode", "norm", "ord",  "p", "pad_mode", "padding",  "reduce",
    "rounding_mode", "side", "uplo"};

/// Strips one Optional level.
TypePtr unwrap_optional(const TypePtr& t, bool* optional) {
  *optional = t->kind() == TypeKind::OptionalType;
  return *optional ? t->castRaw<c10::OptionalType>()->getElementType() : t;
}

bool is_number(TypeKind k) {
  return k == TypeKind::IntType || k == TypeKind::SymIntType || k == TypeKind::FloatType ||
         k == TypeKind::SymFloatType || k == TypeKind::BoolType || is_sym_bool_type(k) ||
         k == TypeKind::NumberType;
}

/// Element types of lists an archive can carry: Tensor[], Tensor?[], int[], SymInt[],
/// float[], bool[].
bool is_list_element(const TypePtr& elem) {
  bool optional = false;
  const TypePtr e = unwrap_optional(elem, &optional);
  if (e->kind() == TypeKind::TensorType) return true;
  if (optional) return false;
  const TypeKind k = e->kind();
  return k == TypeKind::IntType || k == TypeKind::SymIntType || k == TypeKind::FloatType ||
         k == TypeKind::BoolType;
}

/// Whether an archive can give a value of `type` (argument_conversion.cpp's kinds).
bool carriable_argument(const TypePtr& type) {
  bool optional = false;
  const TypePtr t = unwrap_optional(type, &optional);
  const TypeKind k = t->kind();
  if (k == TypeKind::TensorType || is_number(k) || k == TypeKind::ScalarTypeType ||
      k == TypeKind::LayoutType || k == TypeKind::MemoryFormatType ||
      k == TypeKind::DeviceObjType || k == TypeKind::StringType) {
    return true;
  }
  if (k == TypeKind::ListType) return is_list_element(t->castRaw<c10::ListType>()->getElementType());
  // An optional Generator stays None: the op uses the default generator, as in eager.
  if (k == TypeKind::GeneratorType) return optional;
  return false;
}

/// Whether a value of `type` can be a graph value (program.h ValueKind).
bool describable_return(const TypePtr& type) {
  bool optional = false;
  const TypePtr t = unwrap_optional(type, &optional);
  const TypeKind k = t->kind();
  if (k == TypeKind::TensorType) return true;
  if (optional) return false;
  if (is_number(k)) return true;
  if (k == TypeKind::ListType) {
    const TypePtr e = t->castRaw<c10::ListType>()->getElementType();
    bool opt = false;
    const TypePtr inner = unwrap_optional(e, &opt);
    return inner->kind() == TypeKind::TensorType ||
           (!opt && (inner->kind() == TypeKind::IntType || inner->kind() == TypeKind::SymIntType));
  }
  return false;
}

OpVerdict refuse(const char* rule, std::string reason) {
  return OpVerdict{false, rule, std::move(reason)};
}

}  // namespace

const std::vector<std::string>& mode_selector_names() {
  static const std::vector<std::string> sorted = [] {
    std::vector<std::string> v = kModeSelectors;
    std::sort(v.begin(), v.end());
    return v;
  }();
  return sorted;
}
const std::vector<std::pair<std::string, std::string>>& denied_operators() { return kDenied; }

OpVerdict classify_schema(const c10::FunctionSchema& schema, bool dynamic_output_shape) {
  const std::string& name = schema.name();
  for (const auto& [denied, why] : kDenied) {
    if (name == denied) return refuse("denied", why);
  }
  if (name.compare(0, 12, "aten::_test_") == 0) {
    return refuse("denied", "is one of ATen's test operators (aten::_test_*)");
  }
  if (name.compare(0, 6, "aten::") != 0) {
    const std::string ns = name.substr(0, name.find("::"));
    return refuse("namespace", "namespace '" + ns +
                                   "' is not ATen (custom operators need "
                                   "LoadOptions::allow_operators)");
  }
  for (const c10::Argument& a : schema.arguments()) {
    // An optional written argument (`Tensor(a!)? running_mean`) is checked per node instead:
    // left None it writes nothing (meta_check.cpp).
    if (a.alias_info() != nullptr && a.alias_info()->isWrite() &&
        a.real_type()->kind() != TypeKind::OptionalType) {
      return refuse("mutates", "writes to its argument '" + a.name() +
                                   "' (in-place and out= ops are not part of the format: a "
                                   "graph's mutations are InputMutation outputs)");
    }
  }
  if (schema.returns().empty() && std::find(kChecks.begin(), kChecks.end(), name) == kChecks.end()) {
    return refuse("no-return", "returns nothing, so it can act only through side effects");
  }
  // aten::index.Tensor carries the tag because a boolean mask makes its result size depend on
  // data; with integer indices (what exporters emit for x[idx]) it is static. meta_check.cpp
  // refuses a mask at load.
  if (dynamic_output_shape && name != "aten::index") {
    return refuse("dynamic-shape",
                  "its output sizes depend on tensor data (tag dynamic_output_shape), which a "
                  "program cannot declare and pt2rt cannot bound at load");
  }
  for (const c10::Argument& r : schema.returns()) {
    if (!describable_return(r.type())) {
      return refuse("return-type", "returns a " + r.type()->annotation_str() +
                                       ", which is not a graph value (tensor, list or number)");
    }
  }
  for (const c10::Argument& a : schema.arguments()) {
    if (!carriable_argument(a.real_type())) {
      return refuse("argument-type", "takes argument '" + a.name() + "' of type " +
                                         a.real_type()->annotation_str() +
                                         ", which an archive cannot carry");
    }
    bool optional = false;
    if (unwrap_optional(a.real_type(), &optional)->kind() == TypeKind::StringType &&
        !std::binary_search(mode_selector_names().begin(), mode_selector_names().end(),
                            a.name())) {
      return refuse("str-argument", "takes str argument '" + a.name() +
                                        "', which is not one of ATen's mode selectors (file "
                                        "names, paths and free text are not allowed)");
    }
  }
  return OpVerdict{true, "", ""};
}

OpVerdict classify_operator(const c10::OperatorHandle& op) {
  return classify_schema(op.schema(), op.hasTag(at::Tag::dynamic_output_shape));
}

bool explicitly_allowed(const c10::OperatorName& op, const std::vector<std::string>& allow) {
  for (const std::string& a : allow) {
    if (a == op.name) return true;
    if (a.size() == op.name.size() + 1 + op.overload_name.size() &&
        a.compare(0, op.name.size(), op.name) == 0 && a[op.name.size()] == '.' &&
        a.compare(op.name.size() + 1, std::string::npos, op.overload_name) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace pt2rt
