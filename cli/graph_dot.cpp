// cli/graph_dot.cpp — DOT text for a Program's graphs; SVG through Graphviz's dot.
#include "graph_dot.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <map>
#include <sstream>
#include <type_traits>
#include <variant>
#include <vector>

#include "cli.h"
#include "graph_facts.h"

extern char** environ;

namespace pt2rt::cli {
namespace {

constexpr TypeSpelling kTypes = TypeSpelling::Expression;  // symbolic scalars: their expression

/// A DOT string literal's content: quotes and backslashes escaped, control bytes as \xNN
/// (printed literally, never interpreted), newlines as DOT's centred line break.
std::string dot_escape(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

/// Every value id an argument reads (tensors, tensor lists, SymInt/SymFloat/SymBool refs).
std::vector<ValueId> reads(const ArgumentValue& value) {
  std::vector<ValueId> ids;
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, TensorRef> || std::is_same_v<T, TensorListRef> ||
                      std::is_same_v<T, SymIntRef> || std::is_same_v<T, SymFloatRef> ||
                      std::is_same_v<T, SymBoolRef>) {
          ids.push_back(a.value);
        } else if constexpr (std::is_same_v<T, TensorListArg>) {
          ids = a.values;
        } else if constexpr (std::is_same_v<T, OptionalTensorListArg>) {
          for (int64_t v : a.values) {
            if (v >= 0) ids.push_back(static_cast<ValueId>(v));
          }
        } else if constexpr (std::is_same_v<T, SymIntListArg>) {
          for (size_t i = 0; i < a.values.size() && i < a.is_ref.size(); ++i) {
            if (a.is_ref[i]) ids.push_back(static_cast<ValueId>(a.values[i]));
          }
        }
      },
      value);
  return ids;
}

bool is_saved(OutputKind k) { return k == OutputKind::Saved || k == OutputKind::SavedNoVcCheck; }

void write_graph(std::ostream& out, const Program& program, const Graph& g, const std::string& p,
                 std::map<int64_t, std::string>* saved_out,
                 std::map<int64_t, std::string>* saved_in) {
  out << "  subgraph cluster_" << p << " {\n    label=\"" << to_string(g.role)
      << " graph\"; fontsize=14; color=gray60;\n";
  std::map<ValueId, std::string> producer;  // value id -> DOT node id
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const GraphInput& in = g.inputs[i];
    const std::string id = p + "_in" + std::to_string(i);
    const Value* v = in.value < g.values.size() ? &g.values[in.value] : nullptr;
    out << "    " << id << " [shape=ellipse, style=filled, fillcolor=\"#dbe9f6\", label=\""
        << dot_escape(v ? "%" + v->name : "?") << "\\n" << dot_escape(in.descriptor.to_string())
        << "\\n" << dot_escape(v ? value_type(program, *v, kTypes) : "") << "\"];\n";
    producer[in.value] = id;
    if (in.descriptor.kind == InputKind::Saved) (*saved_in)[in.descriptor.idx] = id;
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    const std::string id = p + "_n" + std::to_string(n);
    std::string label = dot_escape(node.op < program.operators.size()
                                       ? program.operators[node.op].qualified()
                                       : "op #" + std::to_string(node.op));
    for (ValueId o : node.outputs) {
      if (o >= g.values.size()) continue;
      label += "\\n" +
               dot_escape("%" + g.values[o].name + ": " + value_type(program, g.values[o], kTypes));
    }
    out << "    " << id << " [shape=box, label=\"" << label << "\"];\n";
    for (const Argument& arg : node.args) {
      for (ValueId r : reads(arg.value)) {
        auto it = producer.find(r);
        if (it != producer.end()) out << "    " << it->second << " -> " << id << ";\n";
      }
    }
    for (ValueId o : node.outputs) producer[o] = id;
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const GraphOutput& o = g.outputs[i];
    const std::string id = p + "_out" + std::to_string(i);
    const bool none = o.value < 0 || static_cast<size_t>(o.value) >= g.values.size();
    out << "    " << id << " [shape=ellipse, style=filled, fillcolor=\""
        << (is_saved(o.descriptor.kind) ? "#f8d7d7" : "#dff2df") << "\", label=\""
        << dot_escape(o.descriptor.to_string()) << "\\n"
        << (none ? "None" : dot_escape(value_type(program, g.values[o.value], kTypes))) << "\"];\n";
    if (!none) {
      auto it = producer.find(static_cast<ValueId>(o.value));
      if (it != producer.end()) out << "    " << it->second << " -> " << id << ";\n";
    }
    if (is_saved(o.descriptor.kind)) (*saved_out)[o.descriptor.idx] = id;
  }
  out << "  }\n";
}

}  // namespace

void write_dot(std::ostream& out, const Program& program) {
  out << "digraph pt2rt {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  std::map<int64_t, std::string> saved_out, saved_in, unused;
  for (const Graph& g : program.graphs) {
    const bool fwd = g.role == GraphRole::Forward, bwd = g.role == GraphRole::Backward;
    write_graph(out, program, g, to_string(g.role), fwd ? &saved_out : &unused,
                bwd ? &saved_in : &unused);
  }
  for (const auto& [k, from] : saved_out) {
    auto it = saved_in.find(k);
    if (it == saved_in.end()) continue;
    out << "  " << from << " -> " << it->second
        << " [color=red, penwidth=2, style=bold, constraint=false, label=\"Saved(" << k
        << ")\", fontcolor=red];\n";
  }
  out << "}\n";
}

void render_svg(const std::string& dot_path, const std::string& svg_path) {
  std::vector<std::string> args = {"dot", "-Tsvg", dot_path, "-o", svg_path};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (::posix_spawnp(&pid, "dot", nullptr, nullptr, argv.data(), environ) != 0) {
    throw UsageError("--svg needs Graphviz's dot, which is not installed (Debian package "
                     "graphviz); --dot FILE writes the DOT source without it");
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw UsageError("dot -Tsvg " + dot_path + " failed (exit status " +
                     std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
}

}  // namespace pt2rt::cli
