// cli/program_text.cpp — text and JSON renderings of a Program for `export-cli inspect`.
#include "program_text.h"

#include <iomanip>
#include <map>
#include <sstream>

#include "signature.h"
#include "tensor_io.h"

namespace pt2rt::cli {
namespace {

using nlohmann::ordered_json;

std::string human_bytes(uint64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  if (bytes < 1024) {
    out << bytes << " B";
  } else if (bytes < (1u << 20)) {
    out << bytes / 1024.0 << " KiB";
  } else {
    out << bytes / 1048576.0 << " MiB";
  }
  return out.str();
}

const std::string& value_name(const Graph& graph, int64_t id) {
  static const std::string kBad = "<bad value id>";
  if (id < 0 || static_cast<size_t>(id) >= graph.values.size()) return kBad;
  return graph.values[static_cast<size_t>(id)].name;
}

std::string value_type(const Program& program, const Graph& graph, int64_t id) {
  if (id < 0 || static_cast<size_t>(id) >= graph.values.size()) return "None";
  const Value& v = graph.values[static_cast<size_t>(id)];
  switch (v.kind) {
    case ValueKind::Tensor:
      return v.meta ? meta_string(*v.meta, program) : "Tensor";
    case ValueKind::SymInt:
      return "SymInt";
    case ValueKind::SymFloat:
      return "SymFloat";
    case ValueKind::SymBool:
      return "SymBool";
    case ValueKind::None:
      return "None";
    case ValueKind::TensorList:
      return "Tensor[]";
    case ValueKind::OptionalTensorList:
      return "Tensor?[]";
  }
  return "?";
}

template <typename T>
std::string list_string(const std::vector<T>& values) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
  out << "]";
  return out.str();
}

std::string ref(const Graph& graph, int64_t id) { return "%" + value_name(graph, id); }

std::string argument_string(const Program& program, const Graph& graph, const ArgumentValue& a) {
  struct Visitor {
    const Program& program;
    const Graph& graph;
    std::string operator()(const NoneArg&) const { return "None"; }
    std::string operator()(const TensorRef& r) const { return ref(graph, r.value); }
    std::string operator()(const TensorListArg& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.values.size(); ++i) out += (i ? ", " : "") + ref(graph, l.values[i]);
      return out + "]";
    }
    std::string operator()(const OptionalTensorListArg& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.values.size(); ++i) {
        out += (i ? ", " : "") + (l.values[i] < 0 ? std::string("None") : ref(graph, l.values[i]));
      }
      return out + "]";
    }
    std::string operator()(const TensorListRef& r) const { return ref(graph, r.value); }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(const IntListArg& l) const { return list_string(l.values); }
    std::string operator()(const SymIntRef& r) const { return ref(graph, r.value); }
    std::string operator()(const SymIntListArg& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.values.size(); ++i) {
        const bool is_ref = i < l.is_ref.size() && l.is_ref[i];
        out += (i ? ", " : "") + (is_ref ? ref(graph, l.values[i]) : std::to_string(l.values[i]));
      }
      return out + "]";
    }
    std::string operator()(double v) const {
      std::ostringstream out;
      out << v;
      return out.str();
    }
    std::string operator()(const FloatListArg& l) const { return list_string(l.values); }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const BoolListArg& l) const {
      std::string out = "[";
      for (size_t i = 0; i < l.values.size(); ++i)
        out += (i ? ", " : "") + operator()(bool(l.values[i]));
      return out + "]";
    }
    std::string operator()(const std::string& s) const { return "'" + s + "'"; }
    std::string operator()(const c10::Scalar& s) const {
      std::ostringstream out;
      if (s.isBoolean()) {
        out << (s.toBool() ? "True" : "False");
      } else if (s.isIntegral(false)) {
        out << s.toLong();
      } else if (s.isComplex()) {
        out << "complex(" << s.toComplexDouble().real() << ", " << s.toComplexDouble().imag()
            << ")";
      } else {
        out << s.toDouble();
      }
      return out.str();
    }
    std::string operator()(c10::ScalarType t) const { return "torch." + dtype_name(t); }
    std::string operator()(c10::Layout l) const {
      std::ostringstream out;
      out << l;
      return out.str();
    }
    std::string operator()(c10::MemoryFormat m) const {
      std::ostringstream out;
      out << m;
      return out.str();
    }
    std::string operator()(const c10::Device& d) const { return "device('" + d.str() + "')"; }
    std::string operator()(const SymFloatRef& r) const { return ref(graph, r.value); }
    std::string operator()(const SymBoolRef& r) const { return ref(graph, r.value); }
  };
  return std::visit(Visitor{program, graph}, a);
}

std::map<std::string, int> op_histogram(const Program& program, const Graph& graph) {
  std::map<std::string, int> hist;
  for (const auto& node : graph.nodes) {
    hist[node.op < program.operators.size() ? program.operators[node.op].qualified()
                                            : "<bad op index>"]++;
  }
  return hist;
}

ordered_json shape_json(const TensorMeta& meta, const Program& program) {
  ordered_json shape = ordered_json::array();
  for (const auto& d : meta.sizes) {
    if (d.is_static()) {
      shape.push_back(d.value);
    } else {
      shape.push_back(dim_string(d, program));
    }
  }
  return shape;
}

ordered_json user_values_json(const std::vector<UserValue>& values, const Program& program) {
  ordered_json out = ordered_json::array();
  for (const auto& v : values) {
    ordered_json j = {{"index", v.index}, {"name", v.name}};
    if (v.meta) {
      j["dtype"] = dtype_name(v.meta->dtype);
      j["shape"] = shape_json(*v.meta, program);
    }
    out.push_back(j);
  }
  return out;
}

/// The fields of an index-carrying descriptor (Plain, Saved, tokens, ...): "idx", plus "attr"
/// and "base" for the kinds that wrap a base descriptor (has_base).
template <typename Descriptor>
void add_index_fields(ordered_json& j, const Descriptor& d) {
  j["idx"] = d.idx;
  if (!has_base(d.kind)) return;
  if (!d.attr.empty()) j["attr"] = d.attr;
  if (d.base) j["base"] = descriptor_json(*d.base);
}

}  // namespace

ordered_json descriptor_json(const InputDescriptor& d) {
  ordered_json j = {{"kind", to_string(d.kind)}};
  switch (d.kind) {
    case InputKind::Param:
    case InputKind::Buffer:
    case InputKind::Constant:
      j["fqn"] = d.fqn;
      break;
    case InputKind::Tangent:
      if (d.output) j["output"] = descriptor_json(*d.output);
      break;
    default:
      add_index_fields(j, d);
      break;
  }
  j["repr"] = d.to_string();
  return j;
}

ordered_json descriptor_json(const OutputDescriptor& d) {
  ordered_json j = {{"kind", to_string(d.kind)}};
  switch (d.kind) {
    case OutputKind::Grad:
    case OutputKind::InputMutation:
      if (d.of) j["of"] = descriptor_json(*d.of);
      break;
    default:
      add_index_fields(j, d);
      break;
  }
  j["repr"] = d.to_string();
  return j;
}

void print_summary(std::ostream& out, const ArchiveFacts& facts, const Program& program) {
  const auto counts = count_weights(program);
  out << facts.path << ": " << facts.archive_format << " archive v" << facts.archive_version
      << ", schema " << program.schema_major << "." << program.schema_minor << ", "
      << facts.entries.size() << " entries\n";
  const Producer& p = program.producer;
  out << "producer: pt2rt " << p.exporter_version << ", torch " << p.torch_version << ", Python "
      << p.python_version;
  if (!p.capture.empty()) out << " (capture: " << p.capture << ")";
  out << "\n\nsignature\n";
  out << "  parameters: " << counts.parameters << " (" << counts.trainable << " trainable, "
      << counts.trainable_elements << " of " << counts.parameter_elements << " elements)\n";
  out << "  buffers: " << counts.buffers << ", constants: " << counts.constants << "\n";
  if (const Graph* g = signature_graph(program)) {
    for (const auto& in : user_inputs(*g)) {
      out << "  input " << in.index << " (" << in.name
          << "): " << (in.meta ? meta_string(*in.meta, program) : "non-tensor") << "\n";
    }
    for (const auto& o : user_outputs(*g)) {
      out << "  output " << o.index << ": "
          << (o.meta ? meta_string(*o.meta, program) : "None/non-tensor") << "\n";
    }
  }
  out << "  range constraints: ";
  if (program.range_constraints.empty()) out << "none";
  for (size_t i = 0; i < program.range_constraints.size(); ++i) {
    const auto& rc = program.range_constraints[i];
    SymExpr e;
    e.op = SymOp::Symbol;
    e.symbol = rc.symbol;
    out << (i ? ", " : "") << rc.min << " <= " << sym_expr_string(e, program)
        << " <= " << (rc.max == INT64_MAX ? std::string("inf") : std::to_string(rc.max));
  }
  out << "\n\nweights: " << program.weights.size() << " tensors, " << human_bytes(counts.bytes)
      << "\n";
  out << "examples: " << program.examples.size();
  for (const auto& ex : program.examples) {
    out << "\n  " << ex.name << ": " << ex.inputs.size() << " input(s), "
        << (ex.references ? "with eager references" : "no references");
    if (ex.references) {
      out << " (gradients: " << ex.references->grads.size() << " full, "
          << ex.references->grad_sketches.size() << " sketched)";
    }
  }
  if (!program.metadata.empty()) {
    out << "\nmetadata:";
    for (const auto& [k, v] : program.metadata) out << "\n  " << k << ": " << v;
  }
  out << "\n";
  for (const auto& graph : program.graphs) {
    out << "\ngraph " << to_string(graph.role) << ": " << graph.nodes.size() << " nodes, "
        << graph.inputs.size() << " inputs, " << graph.outputs.size() << " outputs\n  ops:";
    const char* sep = " ";
    for (const auto& [op, n] : op_histogram(program, graph)) {
      out << sep << op << " x" << n;
      sep = ", ";
    }
    out << "\n  inputs:\n";
    for (const auto& in : graph.inputs) {
      out << "    %" << value_name(graph, in.value) << ": " << value_type(program, graph, in.value)
          << "  " << in.descriptor.to_string() << "\n";
    }
    out << "  outputs:\n";
    for (const auto& o : graph.outputs) {
      out << "    " << (o.value < 0 ? std::string("None") : ref(graph, o.value)) << ": "
          << value_type(program, graph, o.value) << "  " << o.descriptor.to_string() << "\n";
    }
  }
}

std::vector<std::string> node_lines(const Program& program, const Graph& graph) {
  std::vector<std::string> lines;
  for (const auto& node : graph.nodes) {
    std::ostringstream out;
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      out << (i ? ", " : "") << ref(graph, node.outputs[i]);
    }
    out << (node.outputs.empty() ? "" : " = ")
        << (node.op < program.operators.size() ? program.operators[node.op].qualified()
                                               : "<bad op index>")
        << "(";
    for (size_t i = 0; i < node.args.size(); ++i) {
      const auto& a = node.args[i];
      out << (i ? ", " : "") << (a.kwarg_only ? a.name + "=" : "")
          << argument_string(program, graph, a.value);
    }
    out << ")";
    if (node.outputs.size() == 1) out << "  # " << value_type(program, graph, node.outputs[0]);
    lines.push_back(out.str());
  }
  return lines;
}

void print_graph(std::ostream& out, const Program& program, const Graph& graph) {
  out << "graph " << to_string(graph.role) << "(";
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const auto& in = graph.inputs[i];
    out << "\n    %" << value_name(graph, in.value) << ": " << value_type(program, graph, in.value)
        << (i + 1 < graph.inputs.size() ? "," : "") << "  # " << in.descriptor.to_string();
  }
  out << "\n):\n";
  for (const auto& line : node_lines(program, graph)) out << "  " << line << "\n";
  out << "  return (";
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const auto& o = graph.outputs[i];
    out << "\n    " << (o.value < 0 ? std::string("None") : ref(graph, o.value))
        << (i + 1 < graph.outputs.size() ? "," : "") << "  # " << o.descriptor.to_string();
  }
  out << "\n  )\n";
}

ordered_json summary_json(const ArchiveFacts& facts, const Program& program) {
  const auto counts = count_weights(program);
  ordered_json j;
  j["path"] = facts.path;
  j["archive_format"] = facts.archive_format;
  j["archive_version"] = facts.archive_version;
  j["schema_version"] = {{"major", program.schema_major}, {"minor", program.schema_minor}};
  j["producer"] = {{"exporter_version", program.producer.exporter_version},
                   {"torch_version", program.producer.torch_version},
                   {"python_version", program.producer.python_version},
                   {"capture", program.producer.capture}};
  ordered_json sig = {{"num_parameters", counts.parameters},
                      {"num_trainable", counts.trainable},
                      {"num_buffers", counts.buffers},
                      {"num_constants", counts.constants},
                      {"parameter_elements", counts.parameter_elements},
                      {"trainable_elements", counts.trainable_elements}};
  if (const Graph* g = signature_graph(program)) {
    sig["inputs"] = user_values_json(user_inputs(*g), program);
    sig["outputs"] = user_values_json(user_outputs(*g), program);
  }
  j["signature"] = sig;
  ordered_json graphs = ordered_json::array();
  for (const auto& graph : program.graphs) {
    ordered_json g = {{"role", to_string(graph.role)}, {"num_nodes", graph.nodes.size()}};
    ordered_json hist = ordered_json::object();
    for (const auto& [op, n] : op_histogram(program, graph)) hist[op] = n;
    g["op_histogram"] = hist;
    ordered_json inputs = ordered_json::array();
    for (const auto& in : graph.inputs) {
      inputs.push_back({{"name", value_name(graph, in.value)},
                        {"type", value_type(program, graph, in.value)},
                        {"descriptor", descriptor_json(in.descriptor)}});
    }
    ordered_json outputs = ordered_json::array();
    for (const auto& o : graph.outputs) {
      outputs.push_back({{"name", o.value < 0 ? std::string() : value_name(graph, o.value)},
                         {"type", value_type(program, graph, o.value)},
                         {"descriptor", descriptor_json(o.descriptor)}});
    }
    g["inputs"] = inputs;
    g["outputs"] = outputs;
    graphs.push_back(g);
  }
  j["graphs"] = graphs;
  ordered_json weights = ordered_json::array();
  for (const auto& w : program.weights) {
    weights.push_back({{"fqn", w.fqn},
                       {"kind", to_string(w.kind)},
                       {"dtype", dtype_name(w.dtype)},
                       {"shape", w.sizes},
                       {"requires_grad", w.requires_grad},
                       {"persistent", w.persistent},
                       {"entry", w.entry},
                       {"bytes", w.byte_length}});
  }
  j["weights"] = weights;
  j["weights_total_bytes"] = counts.bytes;
  ordered_json symbols = ordered_json::array();
  for (const auto& s : program.symbols) symbols.push_back({{"name", s.name}, {"hint", s.hint}});
  j["symbols"] = symbols;
  ordered_json ranges = ordered_json::array();
  for (const auto& rc : program.range_constraints) {
    ranges.push_back(
        {{"symbol", rc.symbol < program.symbols.size() ? program.symbols[rc.symbol].name
                                                       : std::to_string(rc.symbol)},
         {"min", rc.min},
         {"max", rc.max == INT64_MAX ? ordered_json(nullptr) : ordered_json(rc.max)}});
  }
  j["range_constraints"] = ranges;
  ordered_json examples = ordered_json::array();
  for (const auto& ex : program.examples) {
    examples.push_back({{"name", ex.name},
                        {"num_inputs", ex.inputs.size()},
                        {"has_references", ex.references.has_value()},
                        {"full_grads", ex.references ? ex.references->grads.size() : 0},
                        {"sketched_grads",
                         ex.references ? ex.references->grad_sketches.size() : 0}});
  }
  j["examples"] = examples;
  j["metadata"] = program.metadata;
  ordered_json entries = ordered_json::array();
  for (const auto& e : facts.entries) {
    entries.push_back({{"name", e.name}, {"size", e.size}, {"stored", e.stored}});
  }
  j["entries"] = entries;
  return j;
}

}  // namespace pt2rt::cli
