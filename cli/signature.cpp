// cli/signature.cpp — user inputs/outputs by descriptor, readable shapes, weight counts.
#include "signature.h"

#include <algorithm>
#include <sstream>

#include "tensor_io.h"

namespace pt2rt::cli {
namespace {

UserValue user_value(const Graph& graph, int64_t index, int64_t value_id) {
  UserValue v;
  v.index = index;
  if (value_id >= 0 && static_cast<size_t>(value_id) < graph.values.size()) {
    const Value& value = graph.values[static_cast<size_t>(value_id)];
    v.name = value.name;
    if (value.kind == ValueKind::Tensor && value.meta) v.meta = &*value.meta;
  }
  return v;
}

const char* binary_op(SymOp op) {
  switch (op) {
    case SymOp::Add:
      return " + ";
    case SymOp::Sub:
      return " - ";
    case SymOp::Mul:
      return "*";
    case SymOp::FloorDiv:
      return " // ";
    case SymOp::Mod:
      return " % ";
    case SymOp::Eq:
      return " == ";
    case SymOp::Ne:
      return " != ";
    case SymOp::Lt:
      return " < ";
    case SymOp::Le:
      return " <= ";
    case SymOp::Gt:
      return " > ";
    case SymOp::Ge:
      return " >= ";
    default:
      return nullptr;
  }
}

}  // namespace

const Graph* signature_graph(const Program& program) {
  if (const Graph* g = program.graph(GraphRole::Inference)) return g;
  return program.graph(GraphRole::Forward);
}

std::vector<UserValue> user_inputs(const Graph& graph) {
  std::vector<UserValue> out;
  for (const auto& in : graph.inputs) {
    if (in.descriptor.kind == InputKind::Plain) {
      out.push_back(user_value(graph, in.descriptor.idx, static_cast<int64_t>(in.value)));
    }
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.index < b.index; });
  return out;
}

std::vector<UserValue> user_outputs(const Graph& graph) {
  std::vector<UserValue> out;
  for (const auto& o : graph.outputs) {
    if (o.descriptor.kind == OutputKind::Plain) {
      out.push_back(user_value(graph, o.descriptor.idx, o.value));
    }
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.index < b.index; });
  return out;
}

std::string sym_expr_string(const SymExpr& expr, const Program& program) {
  switch (expr.op) {
    case SymOp::Const:
      return std::to_string(expr.value);
    case SymOp::Symbol:
      return expr.symbol < program.symbols.size() ? program.symbols[expr.symbol].name
                                                  : "s?" + std::to_string(expr.symbol);
    case SymOp::Neg:
      return "-" + (expr.operands.empty() ? "?" : sym_expr_string(expr.operands[0], program));
    default:
      break;
  }
  std::vector<std::string> parts;
  for (const auto& operand : expr.operands) parts.push_back(sym_expr_string(operand, program));
  if (const char* op = binary_op(expr.op); op != nullptr && parts.size() == 2) {
    return "(" + parts[0] + op + parts[1] + ")";
  }
  std::string name = expr.op == SymOp::Max ? "max" : expr.op == SymOp::Min ? "min" : "ceildiv";
  std::string out = name + "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out + ")";
}

std::string dim_string(const Dim& dim, const Program& program) {
  return dim.is_static() ? std::to_string(dim.value) : sym_expr_string(*dim.expr, program);
}

std::string meta_string(const TensorMeta& meta, const Program& program) {
  std::ostringstream out;
  out << dtype_name(meta.dtype) << "[";
  for (size_t i = 0; i < meta.sizes.size(); ++i) {
    out << (i ? ", " : "") << dim_string(meta.sizes[i], program);
  }
  out << "]";
  return out.str();
}

WeightCounts count_weights(const Program& program) {
  WeightCounts c;
  for (const auto& w : program.weights) {
    int64_t numel = 1;
    for (int64_t s : w.sizes) numel *= s;
    c.bytes += w.byte_length;
    switch (w.kind) {
      case WeightKind::Parameter:
        ++c.parameters;
        c.parameter_elements += numel;
        if (w.requires_grad) {
          ++c.trainable;
          c.trainable_elements += numel;
        }
        break;
      case WeightKind::Buffer:
        ++c.buffers;
        break;
      case WeightKind::Constant:
        ++c.constants;
        break;
    }
  }
  return c;
}

std::optional<int64_t> static_batch_size(const Program& program) {
  const Graph* graph = program.graph(GraphRole::Forward);
  if (graph == nullptr) graph = signature_graph(program);
  if (graph == nullptr) return std::nullopt;
  auto inputs = user_inputs(*graph);
  if (inputs.empty() || inputs[0].meta == nullptr || inputs[0].meta->sizes.empty()) {
    return std::nullopt;
  }
  const Dim& d = inputs[0].meta->sizes[0];
  if (!d.is_static()) return std::nullopt;
  return d.value;
}

}  // namespace pt2rt::cli
