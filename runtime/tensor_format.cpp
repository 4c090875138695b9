// runtime/tensor_format.cpp — see tensor_format.h.
#include "tensor_format.h"

#include <sstream>

namespace pt2rt {

std::string dtype_name(c10::ScalarType dtype) {
  switch (dtype) {
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::ComplexHalf: return "complex32";
    case c10::ScalarType::ComplexFloat: return "complex64";
    case c10::ScalarType::ComplexDouble: return "complex128";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::QInt8: return "qint8";
    case c10::ScalarType::QUInt8: return "quint8";
    case c10::ScalarType::QInt32: return "qint32";
    case c10::ScalarType::BFloat16: return "bfloat16";
    default: return c10::toString(dtype);
  }
}

std::string describe_tensor_type(c10::ScalarType dtype, c10::IntArrayRef sizes) {
  std::ostringstream os;
  os << dtype_name(dtype) << '[';
  for (size_t i = 0; i < sizes.size(); ++i) os << (i ? ", " : "") << sizes[i];
  os << ']';
  return os.str();
}

namespace {

const char* binary_op_symbol(SymOp op) {
  switch (op) {
    case SymOp::Add: return " + ";
    case SymOp::Sub: return " - ";
    case SymOp::Mul: return " * ";
    case SymOp::FloorDiv: return " // ";
    case SymOp::Mod: return " % ";
    case SymOp::Eq: return " == ";
    case SymOp::Ne: return " != ";
    case SymOp::Lt: return " < ";
    case SymOp::Le: return " <= ";
    case SymOp::Gt: return " > ";
    case SymOp::Ge: return " >= ";
    default: return nullptr;
  }
}

void write_sym_expr(std::ostream& os, const SymExpr& e, const Program& program) {
  switch (e.op) {
    case SymOp::Const: os << e.value; return;
    case SymOp::Symbol:
      if (e.symbol < program.symbols.size()) os << program.symbols[e.symbol].name;
      else os << "s?" << e.symbol;
      return;
    case SymOp::Neg:
      os << "-(";
      if (!e.operands.empty()) write_sym_expr(os, e.operands[0], program);
      os << ')';
      return;
    case SymOp::Max: case SymOp::Min: case SymOp::CeilDiv: {
      os << (e.op == SymOp::Max ? "max(" : e.op == SymOp::Min ? "min(" : "ceildiv(");
      for (size_t i = 0; i < e.operands.size(); ++i) {
        if (i) os << ", ";
        write_sym_expr(os, e.operands[i], program);
      }
      os << ')';
      return;
    }
    default: {
      const char* sym = binary_op_symbol(e.op);
      os << '(';
      for (size_t i = 0; i < e.operands.size(); ++i) {
        if (i) os << (sym ? sym : " ? ");
        write_sym_expr(os, e.operands[i], program);
      }
      os << ')';
    }
  }
}

}  // namespace

std::string describe_sym_expr(const SymExpr& expr, const Program& program) {
  std::ostringstream os;
  write_sym_expr(os, expr, program);
  return os.str();
}

std::string describe_meta(const TensorMeta& meta, const Program& program) {
  std::ostringstream os;
  os << dtype_name(meta.dtype) << '[';
  for (size_t i = 0; i < meta.sizes.size(); ++i) {
    if (i) os << ", ";
    const Dim& d = meta.sizes[i];
    if (d.is_static()) os << d.value;
    else os << describe_sym_expr(*d.expr, program);
  }
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
