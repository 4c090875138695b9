// runtime/model/signature.cpp — see pt2rt/signature.h. Also the one symbolic-shape printer
// (sym_expr_string / meta_string) that error messages and export-cli share.
#include "pt2rt/signature.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "core/sym_eval.h"

namespace pt2rt {
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

/// Each symbol's range bound (`lower`: min, else max); a missing or unbounded maximum is
/// recorded as nullopt so that only the expressions using it are unbounded.
std::vector<std::optional<int64_t>> symbol_bounds(const Program& program, bool lower) {
  std::vector<std::optional<int64_t>> out(program.symbols.size());
  if (lower) {
    for (auto& v : out) v = 0;
  }
  for (const RangeConstraint& rc : program.range_constraints) {
    if (rc.symbol >= out.size()) continue;
    if (lower) out[rc.symbol] = rc.min;
    else if (rc.max != INT64_MAX) out[rc.symbol] = rc.max;
  }
  return out;
}

bool uses_only(const SymExpr& e, const std::vector<std::optional<int64_t>>& bounds) {
  if (e.op == SymOp::Symbol) return e.symbol < bounds.size() && bounds[e.symbol].has_value();
  return std::all_of(e.operands.begin(), e.operands.end(),
                     [&](const SymExpr& o) { return uses_only(o, bounds); });
}

int64_t bound_of(const SymExpr& e, const std::vector<std::optional<int64_t>>& bounds,
                 int64_t fallback) {
  if (!uses_only(e, bounds)) return fallback;
  std::vector<int64_t> values;
  for (const auto& b : bounds) values.push_back(b.value_or(0));
  return eval_sym(e, values).value_or(fallback);
}

TensorSpec tensor_spec(const Program& program, const Graph& graph, int64_t index,
                       int64_t value_id, std::string name) {
  TensorSpec spec;
  spec.name = std::move(name);
  spec.index = index;
  if (value_id < 0 || static_cast<size_t>(value_id) >= graph.values.size()) return spec;
  const Value& v = graph.values[static_cast<size_t>(value_id)];
  if (v.kind != ValueKind::Tensor || !v.meta) return spec;
  spec.is_tensor = true;
  spec.dtype = v.meta->dtype;
  const auto lo = symbol_bounds(program, true), hi = symbol_bounds(program, false);
  for (const Dim& d : v.meta->sizes) {
    DimSpec dim;
    dim.size = d.value;
    if (d.is_static()) {
      dim.min = dim.max = d.value;
    } else {
      dim.expr = sym_expr_string(*d.expr, program);
      dim.is_symbol = d.expr->op == SymOp::Symbol;
      dim.min = bound_of(*d.expr, lo, 0);
      dim.max = bound_of(*d.expr, hi, INT64_MAX);
    }
    spec.sizes.push_back(std::move(dim));
  }
  return spec;
}

template <typename Item, typename Kind>
std::vector<std::pair<int64_t, int64_t>> plain_values(const std::vector<Item>& items, Kind plain) {
  std::vector<std::pair<int64_t, int64_t>> out;  // (Plain index, value id)
  for (const Item& it : items) {
    if (it.descriptor.kind == plain) {
      out.emplace_back(it.descriptor.idx, static_cast<int64_t>(it.value));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

int64_t index_of(const std::vector<TensorSpec>& specs, const std::string& name) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

std::string TensorSpec::to_string() const {
  if (!is_tensor) return "None";
  std::string out = dtype_name(dtype) + "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    out += (i ? ", " : "") + (sizes[i].is_static() ? std::to_string(sizes[i].size) : sizes[i].expr);
  }
  return out + "]";
}

int64_t Signature::input_index(const std::string& name) const { return index_of(inputs, name); }
int64_t Signature::output_index(const std::string& name) const { return index_of(outputs, name); }

const Graph* signature_graph(const Program& program) {
  if (const Graph* g = program.graph(GraphRole::Inference)) return g;
  return program.graph(GraphRole::Forward);
}

std::string positional_output_name(size_t i) { return "[" + std::to_string(i) + "]"; }

Signature program_signature(const Program& program) {
  Signature sig;
  for (size_t i = 0; i < program.symbols.size(); ++i) {
    SymbolSpec s{program.symbols[i].name, program.symbols[i].hint, 0, INT64_MAX};
    for (const RangeConstraint& rc : program.range_constraints) {
      if (rc.symbol == i) s.min = rc.min, s.max = rc.max;
    }
    sig.symbols.push_back(std::move(s));
  }
  const Graph* g = signature_graph(program);
  if (g == nullptr) return sig;
  for (const auto& [idx, value] : plain_values(g->inputs, InputKind::Plain)) {
    const std::string name =
        value >= 0 && static_cast<size_t>(value) < g->values.size() ? g->values[value].name : "";
    sig.inputs.push_back(tensor_spec(program, *g, idx, value, name));
  }
  sig.params = program.inputs;
  if (sig.params.empty()) {
    for (const TensorSpec& in : sig.inputs) sig.params.push_back({in.name, InputSpec{}});
  }
  const auto outputs = plain_values(g->outputs, OutputKind::Plain);
  for (size_t i = 0; i < outputs.size(); ++i) {
    // validate_program: output_names is empty or has one name per Plain output
    std::string name = i < program.output_names.size() ? program.output_names[i]
                                                       : positional_output_name(i);
    sig.outputs.push_back(tensor_spec(program, *g, outputs[i].first, outputs[i].second,
                                      std::move(name)));
  }
  return sig;
}

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

std::string sym_expr_string(const SymExpr& expr, const Program& program) {
  std::ostringstream os;
  write_sym_expr(os, expr, program);
  return os.str();
}

std::string dim_string(const Dim& dim, const Program& program) {
  return dim.is_static() ? std::to_string(dim.value) : sym_expr_string(*dim.expr, program);
}

std::string meta_string(const TensorMeta& meta, const Program& program) {
  std::string out = dtype_name(meta.dtype) + "[";
  for (size_t i = 0; i < meta.sizes.size(); ++i) {
    out += (i ? ", " : "") + dim_string(meta.sizes[i], program);
  }
  return out + "]";
}

}  // namespace pt2rt
