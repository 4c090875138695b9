// cli/graph_facts.cpp — value names and types, op overloads, histograms of one graph.
#include "graph_facts.h"

#include <map>

#include "signature.h"

namespace pt2rt::cli {
namespace {

void count(std::vector<std::pair<std::string, int>>& counts, const std::string& key) {
  for (auto& [k, n] : counts) {
    if (k == key) {
      ++n;
      return;
    }
  }
  counts.emplace_back(key, 1);
}

}  // namespace

const std::string& value_name(const Graph& graph, int64_t id) {
  static const std::string kBad = "<bad value id>";
  if (id < 0 || static_cast<size_t>(id) >= graph.values.size()) return kBad;
  return graph.values[static_cast<size_t>(id)].name;
}

std::string value_type(const Program& program, const Value& value, TypeSpelling spelling) {
  if (value.kind == ValueKind::Tensor) {
    return value.meta ? meta_string(*value.meta, program) : to_string(value.kind);
  }
  if (spelling == TypeSpelling::Expression) {
    return value.sym ? sym_expr_string(*value.sym, program) : "";
  }
  if (spelling == TypeSpelling::Schema && value.kind == ValueKind::TensorList) return "Tensor[]";
  if (spelling == TypeSpelling::Schema && value.kind == ValueKind::OptionalTensorList) {
    return "Tensor?[]";
  }
  return to_string(value.kind);
}

std::string value_type(const Program& program, const Graph& graph, int64_t id) {
  if (id < 0 || static_cast<size_t>(id) >= graph.values.size()) return "None";
  return value_type(program, graph.values[static_cast<size_t>(id)], TypeSpelling::Schema);
}

std::string op_name(const Program& program, const Node& node) {
  return node.op < program.operators.size() ? program.operators[node.op].qualified()
                                            : "<bad op index>";
}

std::vector<std::pair<std::string, int>> op_histogram(const Program& program, const Graph& graph) {
  std::map<std::string, int> hist;
  for (const auto& node : graph.nodes) hist[op_name(program, node)]++;
  return {hist.begin(), hist.end()};
}

std::vector<std::pair<std::string, int>> input_kinds(const Graph& graph) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& in : graph.inputs) count(counts, to_string(in.descriptor.kind));
  return counts;
}

std::vector<std::pair<std::string, int>> output_kinds(const Graph& graph) {
  std::vector<std::pair<std::string, int>> counts;
  for (const auto& o : graph.outputs) count(counts, to_string(o.descriptor.kind));
  return counts;
}

}  // namespace pt2rt::cli
