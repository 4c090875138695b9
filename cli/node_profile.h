// cli/node_profile.h — per-node and per-operator timing of pt2rt calls, for `export-cli
// profile`: a NodeObserver (pt2rt/node_observer.h) that sums the interpreter's node events.
//
// Node rows are keyed by (graph role, node index); operator rows are the node rows summed by
// op overload, so both cover exactly the same time. Per call (begin_call/end_call) it also
// sums the interpreted time: the spans of the plan segments the call ran, in which the node
// times lie (their sum never exceeds it; the difference is the observer's own bookkeeping).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "pt2rt/node_observer.h"

namespace pt2rt::cli {

struct NodeRow {
  GraphRole graph = GraphRole::Inference;
  uint32_t node = 0;          ///< index into the graph's nodes
  uint32_t position = 0;      ///< position in the plan's per-call order
  bool prologue = false;      ///< a cached weight-only node (runs when a weight changed)
  std::string name;           ///< FX node name
  std::string op;             ///< op overload: "aten::convolution", "aten::add.Tensor"
  std::string outputs;        ///< declared outputs: "float32[4, 32, 48, 48]", "SymInt", ...
  int64_t calls = 0;
  double total_us = 0.0;
};

struct OpRow {
  std::string op;
  int64_t nodes = 0;          ///< node rows of this op
  int64_t calls = 0;
  double total_us = 0.0;
};

/// The nodes a plan of one graph ran per call (NodeEvent::plan_nodes; not the prologue's).
struct PlanNodes {
  GraphRole graph;
  uint32_t nodes;
};

/// One call's times, in microseconds.
struct CallTimes {
  double wall_us = 0.0;         ///< measured by the caller around the whole call
  double interpreted_us = 0.0;  ///< the plan segments' spans (NodeObserver::on_range)
  double nodes_us = 0.0;        ///< the nodes' times inside them
};

class NodeProfile : public NodeObserver {
 public:
  void on_node(const NodeEvent& event) override;
  void on_range(const Graph& graph, uint32_t nodes, bool prologue, int64_t elapsed_ns) override;

  /// Forgets everything recorded (after warm-up calls).
  void reset();
  /// Starts a call's interpreted/node time sums; end_call returns them with `wall_us`.
  void begin_call();
  CallTimes end_call(double wall_us);

  /// Node rows, by total time (largest first); ties in graph role, then node order.
  std::vector<NodeRow> node_rows() const;
  /// node_rows() summed per op overload, by total time.
  std::vector<OpRow> op_rows() const;
  /// Per graph role that ran, the plan's node count per call (graph role order).
  std::vector<PlanNodes> plans() const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::vector<NodeRow>> rows_;  ///< [role][node]; calls == 0: not seen
  std::vector<int64_t> plan_nodes_;         ///< [role]; -1: not seen
  int64_t call_interpreted_ns_ = 0, call_nodes_ns_ = 0;
};

}  // namespace pt2rt::cli
