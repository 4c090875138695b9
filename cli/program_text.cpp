// cli/program_text.cpp — the summary and graph listings of a Program for `export-cli inspect`.
#include "program_text.h"

#include <iomanip>
#include <sstream>

#include "graph_facts.h"
#include "pt2rt/input_tree.h"
#include "signature.h"
#include "tensor_io.h"

namespace pt2rt::cli {
namespace {

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

/// `%addmm = aten::addmm(%fc1.bias, %x, %t)  # float32[4, 10]`.
std::string node_line(const Program& program, const Graph& graph, const Node& node) {
  std::ostringstream out;
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    out << (i ? ", " : "") << ref(graph, node.outputs[i]);
  }
  out << (node.outputs.empty() ? "" : " = ") << op_name(program, node) << "(";
  for (size_t i = 0; i < node.args.size(); ++i) {
    const auto& a = node.args[i];
    out << (i ? ", " : "") << (a.kwarg_only ? a.name + "=" : "")
        << argument_string(program, graph, a.value);
  }
  out << ")";
  if (node.outputs.size() == 1) out << "  # " << value_type(program, graph, node.outputs[0]);
  return out.str();
}

/// Metadata values longer than this are cut in the summary, and keys past the first
/// kMetadataKeys left out (`--json` has them all, whole).
constexpr size_t kMetadataWidth = 100;
constexpr size_t kMetadataKeys = 16;

std::string cut(const std::string& text, size_t width) {
  if (text.size() <= width) return text;
  size_t end = width;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;  // UTF-8
  return text.substr(0, end) + "... (" + std::to_string(text.size()) + " bytes)";
}

/// "1 Plain, 6 Param, 3 Buffer".
std::string kinds_string(const std::vector<std::pair<std::string, int>>& kinds) {
  std::string out;
  for (const auto& [kind, n] : kinds)
    out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  return out.empty() ? "none" : out;
}

std::string percent(uint64_t part, uint64_t whole) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << (whole ? 100.0 * part / whole : 0.0) << "%";
  return out.str();
}

void print_signature(std::ostream& out, const Program& program) {
  out << "signature\n";
  if (has_structured_inputs(program.inputs)) {  // schema 1.6: tuples, lists or dicts
    out << "  forward(";
    for (size_t i = 0; i < program.inputs.size(); ++i) {
      out << (i ? ", " : "") << program.inputs[i].name << ": "
          << input_spec_string(program.inputs[i].spec);
    }
    out << ")\n";
  }
  if (const Graph* g = signature_graph(program)) {
    for (const auto& in : user_inputs(*g)) {
      out << "  input " << in.index << " (" << in.name
          << "): " << (in.meta ? meta_string(*in.meta, program) : "non-tensor") << "\n";
    }
    for (const auto& o : user_outputs(program, *g)) {
      out << "  output " << o.index << " " << o.output_name;
      if (!o.name.empty()) out << " (" << o.name << ")";
      out << ": " << (o.meta ? meta_string(*o.meta, program) : "None/non-tensor") << "\n";
    }
  } else {
    out << "  no inference or forward graph\n";
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
  out << "\n";
}

void print_examples(std::ostream& out, const Program& program) {
  out << "examples: " << program.examples.size() << "\n";
  for (const auto& ex : program.examples) {
    out << "  " << ex.name << ": " << ex.inputs.size() << " input(s), "
        << (ex.references ? "with eager references" : "no references");
    if (ex.references) {
      out << " (gradients: " << ex.references->grads.size() << " full, "
          << ex.references->grad_sketches.size() << " sketched)";
    }
    out << "\n";
  }
}

void print_sizes(std::ostream& out, const ArchiveFacts& facts, const Program& program) {
  out << "size: " << human_bytes(facts.file_bytes) << " (" << facts.file_bytes << " bytes, "
      << facts.entries.size() << " entries)\n";
  for (const auto& part : size_breakdown(facts, program)) {
    std::ostringstream line;
    line << (part.within_program ? "    " : "  ") << std::left
         << std::setw(part.within_program ? 26 : 28) << part.name << std::right << std::setw(10)
         << human_bytes(part.bytes) << "  " << std::setw(6) << percent(part.bytes, facts.file_bytes)
         << (part.within_program ? "  (in program.fb)" : "");
    out << line.str() << "\n";
  }
}

}  // namespace

void print_summary(std::ostream& out, const ArchiveFacts& facts, const Program& program) {
  out << facts.path << ": " << facts.archive_format << " archive v" << facts.archive_version
      << ", schema " << program.schema_major << "." << program.schema_minor << "\n";
  const Producer& p = program.producer;
  out << "producer: pt2rt " << p.exporter_version << ", torch " << p.torch_version << ", Python "
      << p.python_version;
  if (!p.capture.empty()) out << " (capture: " << p.capture << ")";
  out << "\n\n";
  print_signature(out, program);
  const auto counts = count_weights(program);
  out << "\nweights: " << program.weights.size() << " tensors, " << human_bytes(counts.bytes)
      << ": " << counts.parameters << " parameters (" << counts.trainable << " trainable, "
      << counts.trainable_elements << " of " << counts.parameter_elements << " elements), "
      << counts.buffers << " buffers, " << counts.constants << " constants\n";
  out << "graphs (export-cli inspect --graph ROLE lists one):\n";
  for (const auto& graph : program.graphs) {
    out << "  " << to_string(graph.role) << ": " << graph.nodes.size()
        << " nodes; inputs: " << kinds_string(input_kinds(graph))
        << "; outputs: " << kinds_string(output_kinds(graph)) << "\n";
  }
  print_examples(out, program);
  if (!program.metadata.empty()) {
    out << "metadata:\n";
    size_t shown = 0;
    for (const auto& [k, v] : program.metadata) {
      if (shown++ == kMetadataKeys) {
        out << "  ... " << program.metadata.size() - kMetadataKeys << " more (--json lists all)\n";
        break;
      }
      out << "  " << k << ": " << cut(v, kMetadataWidth) << "\n";
    }
  }
  print_sizes(out, facts, program);
}

void print_graph(std::ostream& out, const Program& program, const Graph& graph) {
  out << "graph " << to_string(graph.role) << "(";
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const auto& in = graph.inputs[i];
    out << "\n    %" << value_name(graph, in.value) << ": " << value_type(program, graph, in.value)
        << (i + 1 < graph.inputs.size() ? "," : "") << "  # " << in.descriptor.to_string();
  }
  out << "\n):\n";
  for (const auto& node : graph.nodes) out << "  " << node_line(program, graph, node) << "\n";
  out << "  return (";
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const auto& o = graph.outputs[i];
    out << "\n    " << (o.value < 0 ? std::string("None") : ref(graph, o.value)) << ": "
        << value_type(program, graph, o.value) << (i + 1 < graph.outputs.size() ? "," : "")
        << "  # " << o.descriptor.to_string();
  }
  out << "\n  )\n";
  out << graph.nodes.size() << " nodes; ops:";
  const char* sep = " ";
  for (const auto& [op, n] : op_histogram(program, graph)) {
    out << sep << op << " x" << n;
    sep = ", ";
  }
  out << "\n";
}

}  // namespace pt2rt::cli
