// export-cli inspect — what is in a model.pt2. By default a concise summary (program_text.h):
// versions, producer, the signature with symbolic dims and range constraints, weight counts
// and bytes, each graph's node count, bundled examples, the training state and where the
// archive's bytes go. `--graph ROLE` lists one graph's nodes, inputs and outputs; `--json`
// gives the summary (program_json.h) or, with --graph, the graph's structured nodes
// (graph_json.h). Reads only the archive and its Program IR (no kernels).
//
//   export-cli inspect <model.pt2> [--json] [--graph inference|forward|backward]
//                      [--dot FILE|-] [--svg FILE]
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "archive_facts.h"
#include "cli.h"
#include "graph_dot.h"
#include "graph_json.h"
#include "options.h"
#include "program_json.h"
#include "program_text.h"
#include "pt2rt/archive.h"
#include "pt2rt/program.h"
#include "pt2rt/training_state.h"

namespace pt2rt::cli {
namespace {

/// JSON text that stays valid whatever the archive holds: non-ASCII as \uXXXX escapes
/// (so the terminal filter never needs to touch it), invalid UTF-8 replaced by U+FFFD.
std::string dump_json(const nlohmann::ordered_json& j) {
  return j.dump(2, ' ', /*ensure_ascii=*/true, nlohmann::ordered_json::error_handler_t::replace);
}

GraphRole parse_role(const std::string& text) {
  for (GraphRole role :
       {GraphRole::Inference, GraphRole::Forward, GraphRole::Backward, GraphRole::Joint}) {
    if (to_string(role) == text) return role;
  }
  throw UsageError("--graph must be inference, forward or backward, got '" + text + "'");
}

/// --dot FILE / --svg FILE (graph_dot.h): the graph --graph names, else all of them. The DOT
/// file is written atomically; the SVG is rendered from the DOT text (no temporary file).
int write_pictures(const cxxopts::ParseResult& result, const Program& program,
                   const std::optional<GraphRole>& role) {
  DotOptions options;
  options.role = role;
  const int depth = result["module-depth"].as<int>();
  if (depth < 0) throw UsageError("--module-depth must be 0 or more, got " + std::to_string(depth));
  options.module_depth = static_cast<size_t>(depth);
  if (role && program.graph(*role) == nullptr) {
    throw UsageError(std::string("the archive has no ") + to_string(*role) + " graph");
  }
  const std::string dot_path = result.count("dot") ? result["dot"].as<std::string>() : "";
  if (dot_path == "-" && result.count("svg")) {
    throw UsageError("--svg needs --dot FILE (not -) or no --dot");
  }
  std::ostringstream text;
  const size_t nodes = write_dot(text, program, options);
  if (dot_path == "-") {
    std::cout << text.str();
    return kExitOk;
  }
  if (!dot_path.empty()) {
    write_text_atomically(text.str(), dot_path);
    std::cout << "wrote " << dot_path << "\n";
  }
  if (result.count("svg")) {
    const std::string svg = result["svg"].as<std::string>();
    render_svg(text.str(), nodes, svg);
    std::cout << "wrote " << svg << " (" << nodes << " nodes)\n";
  }
  return kExitOk;
}

}  // namespace

int cmd_inspect(int argc, char** argv) {
  cxxopts::Options options =
      model_options("inspect",
                    "Summarize what a pt2rt archive holds: format and schema versions, "
                    "producer, signature (inputs and outputs with dtype and shape, range "
                    "constraints), weights, graphs, bundled examples, training state, size. "
                    "--graph ROLE lists one graph's nodes, inputs and outputs.\n",
                    "archive to inspect");
  // clang-format off
  options.add_options()
      ("json", "print the summary as one JSON object; with --graph, the graph's nodes")
      ("graph", "list one graph: inference, forward or backward",
       cxxopts::value<std::string>())
      ("dot", "write the graphs as Graphviz DOT to FILE (- for stdout)",
       cxxopts::value<std::string>())
      ("svg", "render the graphs to FILE.svg with Graphviz's dot (Debian package graphviz); "
       "with --graph, that graph only",
       cxxopts::value<std::string>())
      ("module-depth", "--dot/--svg: cluster each graph's nodes by module FQN cut to N "
       "components (0: no clusters)", cxxopts::value<int>()->default_value("2"));
  // clang-format on
  const auto args = parse_model_options(options, argc, argv);
  if (!args) return kExitOk;
  const cxxopts::ParseResult& result = args->result;

  std::optional<GraphRole> role;
  if (result.count("graph")) role = parse_role(result["graph"].as<std::string>());

  const Archive archive = Archive::open(args->path);
  const ArchiveFacts facts = read_archive_facts(args->path, archive);
  const auto program = read_program(archive);
  if (result.count("dot") || result.count("svg")) return write_pictures(result, *program, role);

  if (role) {
    const Graph* graph = program->graph(*role);
    if (graph == nullptr) {
      throw UsageError(facts.path + " has no " + to_string(*role) + " graph");
    }
    if (result.count("json")) {
      std::cout << dump_json(graph_json(*program, *graph)) << "\n";
    } else {
      print_graph(std::cout, *program, *graph);
    }
    return kExitOk;
  }
  // The training state (schema 1.3, pt2rt/training_state.h), checked like train --resume does.
  const std::optional<TrainingState> state = load_training_state(archive, *program);
  if (result.count("json")) {
    auto j = summary_json(facts, *program);
    j["training_state"] = state ? nlohmann::ordered_json(summarize(*state)) : nullptr;
    std::cout << dump_json(j) << "\n";
  } else {
    print_summary(std::cout, facts, *program);
    std::cout << "training state: " << (state ? summarize(*state) : "none") << "\n";
  }
  return kExitOk;
}

}  // namespace pt2rt::cli
