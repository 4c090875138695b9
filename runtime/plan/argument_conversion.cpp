// runtime/plan/argument_conversion.cpp — see argument_conversion.h.
#include "plan/argument_conversion.h"

#include <ATen/ScalarOps.h>
#include <ATen/core/jit_type.h>
#include <c10/util/Exception.h>

#include <sstream>

#include "pt2rt/errors.h"
#include "pt2rt/text.h"

namespace pt2rt {
namespace {

using c10::TypeKind;
using c10::TypePtr;

/// Longest str argument accepted (mode selectors and einsum equations are far shorter).
constexpr size_t kMaxStringArgument = 256;

const char* argument_kind_name(const ArgumentValue& v) {
  static const char* const names[] = {
      "None",        "Tensor",       "Tensor[]", "Tensor?[]",   "TensorList value",
      "int",         "int[]",        "SymInt",   "SymInt[]",    "float",
      "float[]",     "bool",         "bool[]",   "str",         "Scalar",
      "ScalarType",  "Layout",       "MemoryFormat", "Device",  "SymFloat",
      "SymBool"};
  static_assert(std::variant_size_v<ArgumentValue> == sizeof(names) / sizeof(names[0]));
  return names[v.index()];
}

TypeKind normalized(const TypePtr& t) {
  TypeKind k = t->kind();
  if (k == TypeKind::SymIntType) return TypeKind::IntType;
  if (k == TypeKind::SymFloatType) return TypeKind::FloatType;
  return k;
}

bool is_tensor_like(const TypePtr& t) {
  TypeKind k = t->kind();
  if (k == TypeKind::TensorType) return true;
  if (k == TypeKind::OptionalType) return is_tensor_like(t->castRaw<c10::OptionalType>()->getElementType());
  if (k == TypeKind::ListType) return is_tensor_like(t->castRaw<c10::ListType>()->getElementType());
  return false;
}

/// Converts one archive argument against one schema argument.
class Converter {
 public:
  Converter(const NodeContext& ctx, const c10::Argument& sarg) : ctx_(ctx), sarg_(sarg) {}

  PlannedArg convert(const ArgumentValue& v) {
    TypePtr type = sarg_.real_type();
    bool optional = false;
    if (type->kind() == TypeKind::OptionalType) {
      optional = true;
      type = type->castRaw<c10::OptionalType>()->getElementType();
    }
    if (std::holds_alternative<NoneArg>(v)) {
      if (optional || type->kind() == TypeKind::NoneType || type->kind() == TypeKind::AnyType) {
        return constant(c10::IValue());
      }
      // A None for a plain `Tensor` (backward ops whose gradient inputs may be absent, e.g.
      // _scaled_dot_product_efficient_attention_backward's attn_bias): an undefined tensor,
      // as LibTorch's own Python -> IValue conversion makes it (toIValue, TensorType).
      if (type->kind() == TypeKind::TensorType) return constant(c10::IValue(at::Tensor()));
      mismatch(v);
    }
    return std::visit([&](const auto& x) { return this->on(x, type); }, v);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(ctx_.describe() + ": argument '" + sarg_.name() + "' (runtime schema type " +
                      sarg_.real_type()->annotation_str() + "): " + what);
  }
  [[noreturn]] void mismatch(const ArgumentValue& v) const {
    throw SchemaMismatch(ctx_, sarg_.name(),
                         std::string("(runtime schema type ") +
                             sarg_.real_type()->annotation_str() + "): the archive gives a " +
                             argument_kind_name(v) + ", which does not fit this type");
  }

  static PlannedArg constant(c10::IValue v) {
    PlannedArg a;
    a.kind = PlannedArg::Kind::Constant;
    a.constant = std::move(v);
    return a;
  }
  static PlannedArg slot(ValueId id) {
    PlannedArg a;
    a.kind = PlannedArg::Kind::Slot;
    a.slot = id;
    return a;
  }

  void check_value(int64_t id, ValueKind expected) const {
    const auto& values = ctx_.graph.values;
    if (id < 0 || static_cast<uint64_t>(id) >= values.size()) {
      fail("value id " + std::to_string(id) + " is out of range (graph has " +
           std::to_string(values.size()) + " values)");
    }
    ValueKind got = values[id].kind;
    if (got != expected) {
      fail("value " + std::to_string(id) + " ('" + values[id].name + "') is a " +
           to_string(got) + ", expected a " + to_string(expected));
    }
  }

  /// List element type of `type` (ListType), or nullptr.
  static TypePtr list_elem(const TypePtr& type) {
    if (type->kind() != TypeKind::ListType) return nullptr;
    return type->castRaw<c10::ListType>()->getElementType();
  }
  static bool is_optional_tensor(const TypePtr& t) {
    return t && t->kind() == TypeKind::OptionalType &&
           t->castRaw<c10::OptionalType>()->getElementType()->kind() == TypeKind::TensorType;
  }

  static c10::List<bool> bool_list(const std::vector<bool>& v) {
    c10::List<bool> list;
    list.reserve(v.size());
    for (bool b : v) list.push_back(b);
    return list;
  }

  /// A Python number given for a Tensor argument (`aten::add.Tensor(x, 1)` in FX graphs):
  /// a 0-dim "wrapped number" tensor, as torch's Python argument parser makes it, so type
  /// promotion treats it as a scalar and it may mix with tensors on any device.
  static PlannedArg wrapped_number(const c10::Scalar& s) {
    at::Tensor t = c10::scalar_to_tensor(s);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return constant(c10::IValue(std::move(t)));
  }

  PlannedArg on(const NoneArg&, const TypePtr&) { return constant(c10::IValue()); }

  PlannedArg on(const TensorRef& r, const TypePtr& type) {
    if (type->kind() != TypeKind::TensorType && type->kind() != TypeKind::AnyType) {
      mismatch(ArgumentValue(r));
    }
    check_value(r.value, ValueKind::Tensor);
    return slot(r.value);
  }

  PlannedArg on(const TensorListArg& l, const TypePtr& type) {
    TypePtr elem = list_elem(type);
    if (!elem || !(elem->kind() == TypeKind::TensorType || is_optional_tensor(elem))) {
      mismatch(ArgumentValue(l));
    }
    PlannedArg a;
    a.kind = elem->kind() == TypeKind::TensorType ? PlannedArg::Kind::TensorList
                                                  : PlannedArg::Kind::OptionalTensorList;
    for (ValueId id : l.values) {
      check_value(id, ValueKind::Tensor);
      a.elements.push_back(id);
    }
    return a;
  }

  PlannedArg on(const OptionalTensorListArg& l, const TypePtr& type) {
    TypePtr elem = list_elem(type);
    bool plain = elem && elem->kind() == TypeKind::TensorType;
    if (!elem || !(plain || is_optional_tensor(elem))) mismatch(ArgumentValue(l));
    PlannedArg a;
    a.kind = plain ? PlannedArg::Kind::TensorList : PlannedArg::Kind::OptionalTensorList;
    for (int64_t id : l.values) {
      if (id == -1) {
        if (plain) {
          throw SchemaMismatch(ctx_, sarg_.name(),
                               "(runtime schema type Tensor[]): the archive gives a None element");
        }
      } else {
        check_value(id, ValueKind::Tensor);
      }
      a.elements.push_back(id);
    }
    return a;
  }

  PlannedArg on(const TensorListRef& r, const TypePtr& type) {
    TypePtr elem = list_elem(type);
    if (!(elem && elem->kind() == TypeKind::TensorType) && type->kind() != TypeKind::AnyType) {
      mismatch(ArgumentValue(r));
    }
    check_value(r.value, ValueKind::TensorList);
    return slot(r.value);
  }

  /// Length of a fixed-size list type (`int[2]`), from the schema argument.
  int64_t broadcast_length() const { return sarg_.N().has_value() ? *sarg_.N() : 1; }

  PlannedArg on(const int64_t& x, const TypePtr& type) {
    switch (normalized(type)) {
      case TypeKind::IntType:
      case TypeKind::NumberType:
      case TypeKind::AnyType:
      case TypeKind::ScalarTypeType:
      case TypeKind::LayoutType:
      case TypeKind::MemoryFormatType: return constant(c10::IValue(x));
      case TypeKind::FloatType: return constant(c10::IValue(static_cast<double>(x)));
      case TypeKind::TensorType: return wrapped_number(c10::Scalar(x));
      case TypeKind::ListType: {
        TypePtr elem = list_elem(type);
        if (normalized(elem) == TypeKind::IntType) {
          // JIT semantics: an int given for `int[N]` is repeated N times.
          return constant(c10::IValue(std::vector<int64_t>(broadcast_length(), x)));
        }
        break;
      }
      default: break;
    }
    mismatch(ArgumentValue(x));
  }

  PlannedArg on(const IntListArg& l, const TypePtr& type) {
    TypePtr elem = list_elem(type);
    if (elem && normalized(elem) == TypeKind::IntType) return constant(c10::IValue(l.values));
    if (elem && normalized(elem) == TypeKind::FloatType) {
      return constant(c10::IValue(std::vector<double>(l.values.begin(), l.values.end())));
    }
    if (type->kind() == TypeKind::AnyType) return constant(c10::IValue(l.values));
    mismatch(ArgumentValue(l));
  }

  PlannedArg on(const SymIntRef& r, const TypePtr& type) {
    TypeKind k = normalized(type);
    if (k != TypeKind::IntType && k != TypeKind::NumberType && k != TypeKind::FloatType &&
        k != TypeKind::AnyType) {
      mismatch(ArgumentValue(r));
    }
    check_value(r.value, ValueKind::SymInt);
    return slot(r.value);
  }

  PlannedArg on(const SymIntListArg& l, const TypePtr& type) {
    TypePtr elem = list_elem(type);
    if (!elem || normalized(elem) != TypeKind::IntType) mismatch(ArgumentValue(l));
    if (l.values.size() != l.is_ref.size()) {
      fail("SymInt[] with " + std::to_string(l.values.size()) + " values but " +
           std::to_string(l.is_ref.size()) + " is_ref flags");
    }
    bool any_ref = false;
    for (size_t i = 0; i < l.values.size(); ++i) {
      if (l.is_ref[i]) {
        check_value(l.values[i], ValueKind::SymInt);
        any_ref = true;
      }
    }
    if (!any_ref) return constant(c10::IValue(l.values));
    PlannedArg a;
    a.kind = PlannedArg::Kind::IntList;
    a.elements = l.values;
    a.element_is_slot = l.is_ref;
    return a;
  }

  PlannedArg on(const double& x, const TypePtr& type) {
    TypeKind k = normalized(type);
    if (k == TypeKind::FloatType || k == TypeKind::NumberType || k == TypeKind::AnyType) {
      return constant(c10::IValue(x));
    }
    if (k == TypeKind::TensorType) return wrapped_number(c10::Scalar(x));
    if (k == TypeKind::ListType && normalized(list_elem(type)) == TypeKind::FloatType) {
      return constant(c10::IValue(std::vector<double>(broadcast_length(), x)));
    }
    mismatch(ArgumentValue(x));
  }

  PlannedArg on(const FloatListArg& l, const TypePtr& type) {
    TypePtr elem = list_elem(type);
    if ((elem && normalized(elem) == TypeKind::FloatType) || type->kind() == TypeKind::AnyType) {
      return constant(c10::IValue(l.values));
    }
    mismatch(ArgumentValue(l));
  }

  PlannedArg on(const bool& x, const TypePtr& type) {
    TypeKind k = normalized(type);
    if (k == TypeKind::BoolType || k == TypeKind::NumberType || k == TypeKind::AnyType) {
      return constant(c10::IValue(x));
    }
    if (k == TypeKind::TensorType) return wrapped_number(c10::Scalar(x));
    if (k == TypeKind::ListType && list_elem(type)->kind() == TypeKind::BoolType) {
      return constant(c10::IValue(bool_list(std::vector<bool>(broadcast_length(), x))));
    }
    mismatch(ArgumentValue(x));
  }

  PlannedArg on(const BoolListArg& l, const TypePtr& type) {
    TypePtr elem = list_elem(type);
    if ((elem && elem->kind() == TypeKind::BoolType) || type->kind() == TypeKind::AnyType) {
      return constant(c10::IValue(bool_list(l.values)));
    }
    mismatch(ArgumentValue(l));
  }

  PlannedArg on(const std::string& s, const TypePtr& type) {
    if (type->kind() == TypeKind::StringType || type->kind() == TypeKind::AnyType) {
      // The operator policy admits str arguments only as mode selectors ("tanh", "floor",
      // "ij,jk->ik"): short printable ASCII. Anything else is refused here, whatever op.
      if (s.size() > kMaxStringArgument) {
        fail("a str of " + std::to_string(s.size()) + " bytes (at most " +
             std::to_string(kMaxStringArgument) + " are accepted)");
      }
      for (const char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        if (c < 0x20 || c > 0x7e) fail("str " + quoted(s) + " holds a non-printable byte");
      }
      return constant(c10::IValue(s));
    }
    if (type->kind() == TypeKind::DeviceObjType) {
      c10::Device d(c10::kCPU);
      try {
        d = c10::Device(s.substr(0, 64));
      } catch (const c10::Error&) {
        fail(quoted(s, 64) + " is not a device");
      }
      return on(d, type);
    }
    mismatch(ArgumentValue(s));
  }

  PlannedArg on(const c10::Scalar& s, const TypePtr& type) {
    TypeKind k = normalized(type);
    if (k == TypeKind::NumberType || k == TypeKind::AnyType) return constant(c10::IValue(s));
    if (k == TypeKind::TensorType) return wrapped_number(s);
    if (k == TypeKind::FloatType && (s.isFloatingPoint() || s.isIntegral(false))) {
      return constant(c10::IValue(s.toDouble()));
    }
    if (k == TypeKind::IntType && s.isIntegral(false)) return constant(c10::IValue(s.toLong()));
    if (k == TypeKind::BoolType && s.isBoolean()) return constant(c10::IValue(s.toBool()));
    mismatch(ArgumentValue(s));
  }

  PlannedArg on(const c10::ScalarType& t, const TypePtr& type) {
    if (c10::isQIntType(t)) {
      fail(std::string("quantized dtype ") + c10::toString(t) + " is not supported");
    }
    TypeKind k = type->kind();
    if (k == TypeKind::ScalarTypeType || k == TypeKind::IntType || k == TypeKind::AnyType) {
      return constant(c10::IValue(t));
    }
    mismatch(ArgumentValue(t));
  }

  PlannedArg on(const c10::Layout& l, const TypePtr& type) {
    // Every tensor of the format is strided (TensorMeta.layout); sparse and mkldnn tensors
    // carry invariants that the kernels building them do not always check.
    if (l != c10::kStrided) {
      std::ostringstream os;
      os << "layout " << l << " is not supported (only strided)";
      fail(os.str());
    }
    TypeKind k = type->kind();
    if (k == TypeKind::LayoutType || k == TypeKind::IntType || k == TypeKind::AnyType) {
      return constant(c10::IValue(l));
    }
    mismatch(ArgumentValue(l));
  }

  PlannedArg on(const c10::MemoryFormat& m, const TypePtr& type) {
    TypeKind k = type->kind();
    if (k == TypeKind::MemoryFormatType || k == TypeKind::IntType || k == TypeKind::AnyType) {
      return constant(c10::IValue(m));
    }
    mismatch(ArgumentValue(m));
  }

  PlannedArg on(const c10::Device& d, const TypePtr& type) {
    if (!d.is_cpu() && !d.is_cuda() && !d.is_meta()) {
      fail("device '" + d.str() + "' is not supported (cpu, cuda or meta)");
    }
    if (type->kind() == TypeKind::DeviceObjType || type->kind() == TypeKind::AnyType) {
      return constant(c10::IValue(retarget_device(d, ctx_.device)));
    }
    mismatch(ArgumentValue(d));
  }

  PlannedArg on(const SymFloatRef& r, const TypePtr& type) {
    TypeKind k = normalized(type);
    if (k != TypeKind::FloatType && k != TypeKind::NumberType && k != TypeKind::AnyType) {
      mismatch(ArgumentValue(r));
    }
    check_value(r.value, ValueKind::SymFloat);
    return slot(r.value);
  }

  PlannedArg on(const SymBoolRef& r, const TypePtr& type) {
    TypeKind k = type->kind();
    if (k != TypeKind::BoolType && k != TypeKind::NumberType && k != TypeKind::AnyType) {
      mismatch(ArgumentValue(r));
    }
    check_value(r.value, ValueKind::SymBool);
    return slot(r.value);
  }

  const NodeContext& ctx_;
  const c10::Argument& sarg_;
};

}  // namespace

SchemaMismatch::SchemaMismatch(const NodeContext& ctx, std::string argument_, std::string problem_)
    : FormatError(ctx.describe() + ": " +
                  (argument_.empty() ? problem_ : "argument " + quoted(argument_, 128) + " " + problem_)),
      where(ctx.describe()),
      argument(std::move(argument_)),
      problem(std::move(problem_)) {}

std::string NodeContext::describe() const {
  const Node& n = node();
  std::ostringstream os;
  os << "graph " << to_string(graph.role) << ", node " << node_index;
  if (!n.debug.fx_name.empty()) os << " " << quoted(n.debug.fx_name, 128);
  os << " (" << escaped(op.qualified(), 256) << ")";
  return os.str();
}

c10::Device retarget_device(c10::Device recorded, c10::Device model) {
  if (recorded.is_cpu() || recorded.is_cuda()) return model;
  return recorded;
}

std::vector<PlannedArg> plan_arguments(const NodeContext& ctx, const c10::FunctionSchema& schema) {
  const auto& sargs = schema.arguments();
  const Node& node = ctx.node();
  std::vector<const Argument*> assigned(sargs.size(), nullptr);
  size_t position = 0;
  for (const Argument& a : node.args) {
    if (!a.kwarg_only && position < sargs.size() && !sargs[position].kwarg_only()) {
      assigned[position++] = &a;
      continue;
    }
    // Keyword-only (or a positional argument past the runtime schema's positional ones):
    // matched by name.
    size_t j = 0;
    while (j < sargs.size() && sargs[j].name() != a.name) ++j;
    if (j == sargs.size()) {
      throw SchemaMismatch(ctx, a.name,
                           "is not in the running LibTorch's schema " + c10::toString(schema));
    }
    if (assigned[j]) {
      throw FormatError(ctx.describe() + ": argument " + quoted(a.name, 128) + " is given twice");
    }
    assigned[j] = &a;
  }

  std::vector<PlannedArg> planned;
  planned.reserve(sargs.size());
  bool has_tensor_argument = false;
  for (size_t j = 0; j < sargs.size(); ++j) {
    const c10::Argument& sarg = sargs[j];
    has_tensor_argument |= is_tensor_like(sarg.real_type());
    if (assigned[j]) {
      planned.push_back(Converter(ctx, sarg).convert(assigned[j]->value));
    } else if (sarg.default_value().has_value()) {
      PlannedArg d;
      d.constant = *sarg.default_value();
      planned.push_back(std::move(d));
    } else {
      throw SchemaMismatch(ctx, sarg.name(),
                           "is missing and has no default in the running LibTorch's schema " +
                               c10::toString(schema));
    }
  }

  // Factory ops (no tensor argument) with device=None would allocate on the CPU: give them
  // the model's device.
  if (!has_tensor_argument && !ctx.device.is_cpu()) {
    for (size_t j = 0; j < sargs.size(); ++j) {
      TypePtr t = sargs[j].real_type();
      if (t->kind() == TypeKind::OptionalType) t = t->castRaw<c10::OptionalType>()->getElementType();
      if (sargs[j].name() == "device" && t->kind() == TypeKind::DeviceObjType &&
          planned[j].kind == PlannedArg::Kind::Constant && planned[j].constant.isNone()) {
        planned[j].constant = c10::IValue(ctx.device);
      }
    }
  }
  return planned;
}

void collect_slots(const PlannedArg& arg, std::vector<ValueId>& out) {
  switch (arg.kind) {
    case PlannedArg::Kind::Constant: return;
    case PlannedArg::Kind::Slot: out.push_back(arg.slot); return;
    case PlannedArg::Kind::TensorList:
    case PlannedArg::Kind::OptionalTensorList:
      for (int64_t e : arg.elements) {
        if (e >= 0) out.push_back(static_cast<ValueId>(e));
      }
      return;
    case PlannedArg::Kind::IntList:
      for (size_t i = 0; i < arg.elements.size(); ++i) {
        if (arg.element_is_slot[i]) out.push_back(static_cast<ValueId>(arg.elements[i]));
      }
      return;
  }
}

}  // namespace pt2rt
