// pt2rt/node_observer.h: the interpreter reports every node of the plans a call runs, once
// per call and in plan order, with the program's names and op overloads; nothing when no
// observer is installed. On the mlp fixture (exported at test time): its inference plan
// hoists the weights' transposes into the cached prologue, reported on the first call only.
#include <ATen/ATen.h>
#include "catch_compat.h"

#include <mutex>
#include <set>
#include <vector>

#include "fixtures.h"
#include "model/model_impl.h"
#include "pt2rt/model.h"
#include "pt2rt/node_observer.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

struct Seen {
  GraphRole role;
  uint32_t node, position, plan_nodes;
  bool prologue;
  std::string name, op;
  int64_t ns;
};

struct Span {
  GraphRole role;
  uint32_t nodes;
  bool prologue;
  int64_t ns;
};

class Recorder : public NodeObserver {
 public:
  void on_node(const NodeEvent& e) override {
    std::lock_guard<std::mutex> lock(mutex);
    nodes.push_back(Seen{e.graph.role, e.node, e.position, e.plan_nodes, e.prologue, e.name(),
                         e.op().qualified(), e.elapsed_ns});
  }
  void on_range(const Graph& graph, uint32_t n, bool prologue, int64_t ns) override {
    std::lock_guard<std::mutex> lock(mutex);
    spans.push_back(Span{graph.role, n, prologue, ns});
  }
  void clear() { nodes.clear(), spans.clear(); }
  std::mutex mutex;
  std::vector<Seen> nodes;
  std::vector<Span> spans;
};

/// The op overload a plan instruction calls, from the dispatcher's schema (native ops: the
/// program's name, which is how they were resolved).
std::string resolved_op(const Instruction& ins, const Program& program, const Graph& graph) {
  if (!ins.op) return program.operators[graph.nodes[ins.node].op].qualified();
  const c10::OperatorName& name = ins.op->schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

/// `seen` (one call's events of one plan, prologue excluded) is `plan`'s instruction list in
/// order, with the program's names and op overloads.
void check_plan_order(const std::vector<Seen>& seen, const ExecutionPlan& plan) {
  const std::vector<Instruction>& ins = plan.instructions();
  REQUIRE(seen.size() == ins.size());
  std::set<std::string> names;
  for (size_t k = 0; k < ins.size(); ++k) {
    INFO("plan position " << k << " of graph " << to_string(plan.graph().role));
    CHECK(seen[k].role == plan.graph().role);
    CHECK(seen[k].node == ins[k].node);
    CHECK(seen[k].position == k);
    CHECK(seen[k].plan_nodes == ins.size());
    CHECK_FALSE(seen[k].prologue);
    CHECK(seen[k].op == resolved_op(ins[k], plan.program(), plan.graph()));
    CHECK(seen[k].name == plan.graph().nodes[ins[k].node].debug.fx_name);
    CHECK(!seen[k].name.empty());
    CHECK(seen[k].ns >= 0);
    names.insert(seen[k].name);
  }
  CHECK(names.size() == ins.size());  // FX names are unique within a graph
}

std::vector<Seen> of_role(const std::vector<Seen>& seen, GraphRole role, bool prologue) {
  std::vector<Seen> out;
  for (const Seen& s : seen) {
    if (s.role == role && s.prologue == prologue) out.push_back(s);
  }
  return out;
}

/// Per span kind, the span's node count equals the events, and the node times lie in it.
void check_spans(const Recorder& r) {
  uint64_t nodes = 0;
  int64_t node_ns = 0, span_ns = 0;
  for (const Span& s : r.spans) nodes += s.nodes, span_ns += s.ns;
  for (const Seen& s : r.nodes) node_ns += s.ns;
  CHECK(nodes == r.nodes.size());
  CHECK(node_ns <= span_ns);
}

}  // namespace

TEST_CASE("node observer: every inference node once per call, in plan order",
          "[node_observer]") {
  const std::vector<at::Tensor> x = to_tensors(load_record("mlp_ref.pt").at("inputs"));
  Model m = Model::load(archive_path("mlp", "default"));
  m.eval();
  const ExecutionPlan& plan = *model_state(m).inference->plan;
  REQUIRE(plan.instructions().size() > 2);
  Recorder r;

  {
    ScopedNodeObserver observing(r);
    CHECK(installed_node_observer() == &r);
    m.forward(x);  // first call: the prologue fills the weight cache
    const std::vector<Seen> prologue = of_role(r.nodes, GraphRole::Inference, true);
    CHECK(prologue.size() == plan.prologue().size());
    for (size_t k = 0; k < prologue.size(); ++k) {
      CHECK(prologue[k].node == plan.prologue()[k].node);
      CHECK(prologue[k].plan_nodes == plan.prologue().size());
    }
    check_plan_order(of_role(r.nodes, GraphRole::Inference, false), plan);
    check_spans(r);

    r.clear();
    m.forward(x);  // cached prologue: the per-call nodes alone
    check_plan_order(r.nodes, plan);
    REQUIRE(r.spans.size() == plan.segments().size());
    check_spans(r);
  }
  CHECK(installed_node_observer() == nullptr);
  r.clear();
  m.forward(x);
  CHECK(r.nodes.empty());
  CHECK(r.spans.empty());
}

TEST_CASE("node observer: training forward and backward nodes, once per call each",
          "[node_observer]") {
  const std::vector<at::Tensor> x = to_tensors(load_record("mlp_ref.pt").at("inputs"));
  Model m = Model::load(archive_path("mlp", "default"));
  m.train();
  Recorder r;
  ScopedNodeObserver observing(r);
  for (int call = 0; call < 2; ++call) {
    r.clear();
    m.forward(x)[0].sum().backward();
    for (GraphRole role : {GraphRole::Forward, GraphRole::Backward}) {
      INFO("call " << call << ", graph " << to_string(role));
      const std::vector<Seen> seen = of_role(r.nodes, role, false);
      REQUIRE(!seen.empty());
      std::set<uint32_t> nodes;
      for (size_t k = 0; k < seen.size(); ++k) {
        CHECK(seen[k].position == k);
        CHECK(seen[k].plan_nodes == seen.size());
        nodes.insert(seen[k].node);
      }
      CHECK(nodes.size() == seen.size());
    }
    // the forward runs before the backward
    CHECK(r.nodes.front().role == GraphRole::Forward);
    CHECK(r.nodes.back().role == GraphRole::Backward);
    check_spans(r);
  }
}

TEST_CASE("node observer: scopes nest and restore the previous observer", "[node_observer]") {
  Recorder outer, inner;
  CHECK(installed_node_observer() == nullptr);
  {
    ScopedNodeObserver a(outer);
    {
      ScopedNodeObserver b(inner);
      CHECK(installed_node_observer() == &inner);
    }
    CHECK(installed_node_observer() == &outer);
  }
  CHECK(installed_node_observer() == nullptr);
}
