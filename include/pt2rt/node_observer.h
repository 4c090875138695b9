// pt2rt/node_observer.h — per-node observation of the interpreter: which node of which graph
// ran, and for how long: the analogue of ExecuTorch's ETDump (its EventTracer records each
// instruction of a method; the Inspector API reads the per-instruction timings back —
// https://pytorch.org/executorch/stable/etdump.html, .../model-inspector.html).
//
// While a ScopedNodeObserver is alive, every execution plan that runs (inference, training
// forward, backward — whichever thread runs it) reports each node it executes, in plan order,
// to the installed NodeObserver, then the span of the plan's execution loop the nodes ran in:
//
//   ExecutionPlan segment:  t0 ─ node a ─ on_node(a) ─ node b ─ on_node(b) ─ … ─ t1  on_range
//
// A node's time (NodeEvent::elapsed_ns) is the wall time (std::chrono::steady_clock) of its
// kernel call, the checks of its results, storing them and releasing the values whose last use
// it was (their memory is freed there); the time between nodes (the observer's own calls,
// the loop) is in the range's time only, so per range: sum of its nodes' times <= its time.
// A call's interpreted time is the sum of its ranges; what lies outside them (binding inputs,
// autograd, handing outputs out) belongs to the caller. On CUDA the times measure the launch
// (kernels run asynchronously), not the kernel.
//
// Weight-only nodes hoisted into a plan's cached prologue (runtime/README.md: weight cache)
// run only when a weight changed since the last call; they are reported then, with
// NodeEvent::prologue set, as a range of their own.
//
// Cost when no observer is installed: one atomic load per plan segment (acquire ordering: a
// plain load on x86, like a relaxed one), not per node.
//
// Threads: one observer at a time is installed process-wide; it is called from every thread
// that runs a plan (autograd may run the backward on its own threads), concurrently when
// several threads run plans at once, so its methods must be thread-safe.
#pragma once

#include <cstdint>

#include "pt2rt/program.h"

namespace pt2rt {

/// One node that ran. The references point into the Model's immutable Program (valid while
/// the Model is alive); the event itself lives only for the duration of the call.
struct NodeEvent {
  const Program& program;
  const Graph& graph;       ///< graph.role: GraphRole::Inference, Forward or Backward
  uint32_t node;            ///< index into graph.nodes
  uint32_t position;        ///< index of the node in the order the plan runs its nodes per call
  uint32_t plan_nodes;      ///< nodes the plan runs per call (prologue: nodes of the prologue)
  bool prologue;            ///< a weight-only node of the cached prologue (see above)
  int64_t elapsed_ns;       ///< wall time of the node (see the file comment)

  const Node& graph_node() const { return graph.nodes[node]; }
  /// The FX node name recorded at export ("convolution_1", "addmm"); may be empty.
  const std::string& name() const { return graph.nodes[node].debug.fx_name; }
  /// The node's op overload: op().qualified() is "aten::addmm" or "aten::add.Tensor".
  const Operator& op() const { return program.operators[graph.nodes[node].op]; }
};

/// Receives the interpreter's node events (see the file comment). Methods should not throw:
/// an exception from one propagates out of the model call that ran the node, as a kernel's
/// would (unwrapped, not as an ExecutionError).
class NodeObserver {
 public:
  virtual ~NodeObserver() = default;
  /// After each node ran (successful nodes only: a node that throws is not reported).
  virtual void on_node(const NodeEvent& event) = 0;
  /// After a plan segment (or a prologue) of `graph` ran: the wall time from before its first
  /// node to after the last on_node, and how many nodes it ran.
  virtual void on_range(const Graph& graph, uint32_t nodes, bool prologue,
                        int64_t elapsed_ns) {
    (void)graph, (void)nodes, (void)prologue, (void)elapsed_ns;
  }
};

/// Installs `observer` for the lifetime of the scope (RAII), restoring the previously
/// installed one (or none) on destruction. The observer is borrowed: it must outlive the
/// scope, and the scope must end only after the model calls that may report to it returned
/// (a plan that started while it was installed calls it until the plan segment ends).
class ScopedNodeObserver {
 public:
  explicit ScopedNodeObserver(NodeObserver& observer);
  ~ScopedNodeObserver();
  ScopedNodeObserver(const ScopedNodeObserver&) = delete;
  ScopedNodeObserver& operator=(const ScopedNodeObserver&) = delete;

 private:
  NodeObserver* previous_;
};

/// The observer installed now, or nullptr.
NodeObserver* installed_node_observer();

}  // namespace pt2rt
