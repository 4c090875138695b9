// cli/graph_dot.cpp — DOT text for a Program's graphs; SVG through Graphviz's dot.
#include "graph_dot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <thread>
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
constexpr size_t kSavedEdgeNodes = 400;  // saved-activation edges drawn up to this many nodes

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

/// The FQN of the innermost module a node ran in (`nn_module_stack`'s last entry, else
/// `module_fqn`), cut to `depth` dot-separated components; "" for none or depth 0.
std::string module_of(const Node& node, size_t depth) {
  if (depth == 0) return "";
  std::string fqn = node.debug.module_fqn;
  if (fqn.empty() && !node.debug.nn_module_stack.empty()) fqn = node.debug.nn_module_stack.back();
  size_t end = std::string::npos, from = 0;
  for (size_t k = 0; k < depth; ++k) {
    end = fqn.find('.', from);
    if (end == std::string::npos) break;
    from = end + 1;
  }
  return end == std::string::npos ? fqn : fqn.substr(0, end);
}

void write_graph(std::ostream& out, const Program& program, const Graph& g, const std::string& p,
                 size_t module_depth, std::map<int64_t, std::string>* saved_out,
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
  // Node boxes, grouped into one nested cluster per module (in order of first appearance);
  // edges after all clusters (an edge written inside a cluster would pull its ends in).
  std::vector<std::string> modules;              // cluster order
  std::map<std::string, std::string> boxes;      // module -> its boxes' DOT lines
  std::ostringstream edges;
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
    const std::string module = module_of(node, module_depth);
    if (!boxes.count(module)) modules.push_back(module);
    boxes[module] += "      " + id + " [shape=box, label=\"" + label + "\"];\n";
    for (const Argument& arg : node.args) {
      for (ValueId r : reads(arg.value)) {
        auto it = producer.find(r);
        if (it != producer.end()) edges << "    " << it->second << " -> " << id << ";\n";
      }
    }
    for (ValueId o : node.outputs) producer[o] = id;
  }
  for (size_t m = 0; m < modules.size(); ++m) {
    if (modules[m].empty()) {
      out << boxes[modules[m]];
      continue;
    }
    out << "    subgraph cluster_" << p << "_m" << m << " {\n      label=\""
        << dot_escape(modules[m]) << "\"; fontsize=11; color=gray80; style=rounded;\n"
        << boxes[modules[m]] << "    }\n";
  }
  out << edges.str();
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

size_t write_dot(std::ostream& out, const Program& program, const DotOptions& options) {
  out << "digraph pt2rt {\n  rankdir=TB;\n  node [fontname=\"monospace\", fontsize=10];\n";
  std::map<int64_t, std::string> saved_out, saved_in, unused;
  size_t nodes = 0;
  for (const Graph& g : program.graphs) {
    if (options.role && g.role != *options.role) continue;
    const bool fwd = g.role == GraphRole::Forward, bwd = g.role == GraphRole::Backward;
    write_graph(out, program, g, to_string(g.role), options.module_depth,
                fwd ? &saved_out : &unused, bwd ? &saved_in : &unused);
    nodes += g.nodes.size();
  }
  // Edges between clusters with constraint=false make dot's layout super-linear (an
  // efficientnet_b0 program: 1.9 s without them, over 60 s with them); above kSavedEdgeNodes
  // nodes the Saved(k) labels of both ends pair them instead.
  if (nodes > kSavedEdgeNodes && !saved_out.empty()) {
    out << "  label=\"saved activations: forward output Saved(k) is backward input Saved(k) "
           "(edges drawn up to " << kSavedEdgeNodes << " nodes)\"; labelloc=t;\n";
    saved_out.clear();
  }
  for (const auto& [k, from] : saved_out) {
    auto it = saved_in.find(k);
    if (it == saved_in.end()) continue;
    out << "  " << from << " -> " << it->second
        << " [color=red, penwidth=2, style=bold, constraint=false, label=\"Saved(" << k
        << ")\", fontcolor=red];\n";
  }
  out << "}\n";
  return nodes;
}

namespace {

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

/// An anonymous temporary file holding `text`, positioned at its start (no name on disk),
/// closed when the File goes.
File anonymous_file(const std::string& text) {
  File f(std::tmpfile(), &std::fclose);
  if (f == nullptr) throw UsageError(std::string("cannot create a temporary file: ") +
                                     std::strerror(errno));
  if (!text.empty() && std::fwrite(text.data(), 1, text.size(), f.get()) != text.size()) {
    throw UsageError("cannot write a temporary file (disk full?)");
  }
  std::fflush(f.get());
  std::rewind(f.get());
  return f;
}

/// Copies `from` (an open file, from its start) to `path` atomically: a temp file in the same
/// directory, fsync, rename. Nothing is left at `path` or beside it on failure.
void copy_atomically(FILE* from, const std::string& path) {
  const size_t slash = path.rfind('/');
  std::string tmpl = (slash == std::string::npos ? std::string() : path.substr(0, slash + 1)) +
                     ".pt2rt-tmp-XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw UsageError("cannot write " + path + ": " + std::strerror(errno));
  bool ok = true;
  std::rewind(from);
  char buf[1 << 16];
  for (size_t n; ok && (n = std::fread(buf, 1, sizeof buf, from)) > 0;) {
    for (size_t off = 0; ok && off < n;) {
      const ssize_t w = ::write(fd, buf + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      ok = w > 0;
      if (ok) off += static_cast<size_t>(w);
    }
  }
  ok = ok && ::fchmod(fd, 0644) == 0 && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmpl.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmpl.c_str());
    throw UsageError("cannot write " + path + ": " + why);
  }
}

}  // namespace

void write_text_atomically(const std::string& text, const std::string& path) {
  copy_atomically(anonymous_file(text).get(), path);
}

void render_svg(const std::string& dot, size_t nodes, const std::string& svg_path) {
  std::vector<std::string> args = {"dot", "-Tsvg"};
  if (nodes > 1000) {  // bounded mincross / network-simplex passes (Graphviz attributes)
    args.insert(args.end(), {"-Gmclimit=0.3", "-Gnslimit=2", "-Gnslimit1=2", "-Gsearchsize=10"});
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  File in = anonymous_file(dot);
  const File out = anonymous_file("");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, ::fileno(in.get()), 0);
  posix_spawn_file_actions_adddup2(&actions, ::fileno(out.get()), 1);
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, "dot", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  in.reset();
  if (spawned != 0) {
    throw UsageError("--svg needs Graphviz's dot, which is not installed (Debian package "
                     "graphviz); --dot FILE writes the DOT source without it");
  }
  const auto start = std::chrono::steady_clock::now();
  auto next_note = start + std::chrono::seconds(10);
  int status = 0;
  pid_t done = 0;
  while ((done = ::waitpid(pid, &status, WNOHANG)) == 0 || (done < 0 && errno == EINTR)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_note) {
      std::cerr << "export-cli inspect: Graphviz's dot is laying out " << nodes << " nodes ("
                << std::chrono::duration_cast<std::chrono::seconds>(now - start).count()
                << " s so far; --graph ROLE renders one graph)" << std::endl;
      next_note = now + std::chrono::seconds(10);
    }
  }
  if (done < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw UsageError("dot -Tsvg failed on " + std::to_string(nodes) + " nodes (exit status " +
                     std::to_string(done > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                     "); --dot FILE writes the DOT source to render elsewhere");
  }
  copy_atomically(out.get(), svg_path);
}

}  // namespace pt2rt::cli
