// cli/node_profile.cpp — NodeProfile: node events summed into node, operator and call rows.
#include "node_profile.h"

#include <algorithm>
#include <map>

#include "graph_facts.h"

namespace pt2rt::cli {
namespace {

constexpr size_t kRoles = static_cast<size_t>(GraphRole::Joint) + 1;

/// "float32[4, 32, 48, 48]" per output, ", "-joined; "SymInt" & co. for non-tensors.
std::string outputs_string(const Program& program, const Node& node, const Graph& graph) {
  std::string out;
  for (ValueId v : node.outputs) {
    if (!out.empty()) out += ", ";
    out += value_type(program, graph.values[v], TypeSpelling::Kind);
  }
  return out;
}

}  // namespace

void NodeProfile::on_node(const NodeEvent& e) {
  const auto role = static_cast<size_t>(e.graph.role);
  std::lock_guard<std::mutex> lock(mutex_);
  if (rows_.empty()) {
    rows_.resize(kRoles);
    plan_nodes_.assign(kRoles, -1);
  }
  std::vector<NodeRow>& rows = rows_[role];
  if (rows.size() < e.graph.nodes.size()) rows.resize(e.graph.nodes.size());
  NodeRow& row = rows[e.node];
  if (row.calls == 0) {  // first sight: the strings, once
    row.graph = e.graph.role;
    row.node = e.node;
    row.position = e.position;
    row.prologue = e.prologue;
    row.name = e.name();
    row.op = e.op().qualified();
    row.outputs = outputs_string(e.program, e.graph_node(), e.graph);
  }
  row.calls += 1;
  row.total_us += static_cast<double>(e.elapsed_ns) / 1000.0;
  if (!e.prologue) plan_nodes_[role] = e.plan_nodes;
  call_nodes_ns_ += e.elapsed_ns;
}

void NodeProfile::on_range(const Graph&, uint32_t, bool, int64_t elapsed_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  call_interpreted_ns_ += elapsed_ns;
}

void NodeProfile::reset() {
  std::lock_guard<std::mutex> lock(mutex_);
  rows_.clear();
  plan_nodes_.clear();
  call_interpreted_ns_ = call_nodes_ns_ = 0;
}

void NodeProfile::begin_call() {
  std::lock_guard<std::mutex> lock(mutex_);
  call_interpreted_ns_ = call_nodes_ns_ = 0;
}

CallTimes NodeProfile::end_call(double wall_us) {
  std::lock_guard<std::mutex> lock(mutex_);
  return CallTimes{wall_us, static_cast<double>(call_interpreted_ns_) / 1000.0,
                   static_cast<double>(call_nodes_ns_) / 1000.0};
}

std::vector<NodeRow> NodeProfile::node_rows() const {
  std::vector<NodeRow> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& rows : rows_) {
      for (const NodeRow& row : rows) {
        if (row.calls > 0) out.push_back(row);
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const NodeRow& a, const NodeRow& b) {
    return a.total_us > b.total_us;
  });
  return out;
}

std::vector<OpRow> NodeProfile::op_rows() const {
  std::map<std::string, OpRow> by_op;
  for (const NodeRow& n : node_rows()) {
    OpRow& row = by_op[n.op];
    row.op = n.op;
    row.nodes += 1;
    row.calls += n.calls;
    row.total_us += n.total_us;
  }
  std::vector<OpRow> out;
  for (auto& [op, row] : by_op) out.push_back(std::move(row));
  std::stable_sort(out.begin(), out.end(),
                   [](const OpRow& a, const OpRow& b) { return a.total_us > b.total_us; });
  return out;
}

std::vector<PlanNodes> NodeProfile::plans() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PlanNodes> out;
  for (size_t role = 0; role < plan_nodes_.size(); ++role) {
    if (plan_nodes_[role] >= 0) {
      out.push_back(PlanNodes{static_cast<GraphRole>(role),
                              static_cast<uint32_t>(plan_nodes_[role])});
    }
  }
  return out;
}

}  // namespace pt2rt::cli
