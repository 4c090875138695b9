// runtime/plan.cpp — building an ExecutionPlan (see plan.h); running it is interpreter.cpp.
#include "plan.h"

#include <algorithm>
#include <string>

#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

std::string graph_where(const Graph& graph, size_t node) {
  return std::string("graph ") + to_string(graph.role) + ", node " + std::to_string(node);
}

}  // namespace

std::unique_ptr<ExecutionPlan> ExecutionPlan::build(std::shared_ptr<const Program> program,
                                                    const Graph& graph,
                                                    const std::vector<ResolvedOp>& ops,
                                                    c10::Device device,
                                                    ResolutionReport* report) {
  std::unique_ptr<ExecutionPlan> plan(new ExecutionPlan());
  plan->graph_ = &graph;
  plan->device_ = device;
  const size_t num_values = graph.values.size();
  const std::string where = std::string("graph ") + to_string(graph.role);

  for (const GraphInput& in : graph.inputs) {
    if (in.value >= num_values) {
      throw FormatError(where + ": input " + in.descriptor.to_string() + " refers to value " +
                        std::to_string(in.value) + " of " + std::to_string(num_values));
    }
    plan->input_slots_.push_back(in.value);
  }
  for (const GraphOutput& out : graph.outputs) {
    if (out.value < -1 || out.value >= static_cast<int64_t>(num_values)) {
      throw FormatError(where + ": output " + out.descriptor.to_string() + " refers to value " +
                        std::to_string(out.value) + " of " + std::to_string(num_values));
    }
    plan->output_slots_.push_back(out.value);
  }

  plan->instructions_.reserve(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    if (node.op >= ops.size()) {
      throw FormatError(where + ", node " + std::to_string(i) + ": op index " +
                        std::to_string(node.op) + " out of range (" + std::to_string(ops.size()) +
                        " operators)");
    }
    const ResolvedOp& rop = ops[node.op];
    const Operator& op = program->operators[node.op];
    if (!rop.resolved()) {
      if (report) continue;  // already reported as a missing operator
      throw OpResolutionError(graph_where(graph, i) + ": operator " + op.qualified() +
                              " is not resolved");
    }
    NodeContext ctx{*program, graph, i, op, device};
    const c10::FunctionSchema& schema = rop.schema();
    Instruction ins;
    try {
      if (node.outputs.size() != schema.returns().size()) {
        throw SchemaMismatch(ctx, "",
                             "the node has " + std::to_string(node.outputs.size()) +
                                 " outputs but the running LibTorch's schema returns " +
                                 std::to_string(schema.returns().size()) + ": " +
                                 c10::toString(schema));
      }
      ins.args = plan_arguments(ctx, schema);
    } catch (const SchemaMismatch& m) {
      if (!report || !rop.schema_differs) throw;
      report->mismatch(op, m.argument, m.problem, m.where);
      continue;
    }
    ins.op = rop.handle;
    ins.native = rop.native ? rop.native->kernel : nullptr;
    ins.node = static_cast<uint32_t>(i);
    for (const c10::Argument& r : schema.returns()) {
      if (r.alias_info() != nullptr) ins.checks |= Instruction::kCheckViews;
    }
    for (ValueId v : node.outputs) {
      if (v >= num_values) {
        throw FormatError(ctx.describe() + ": output value " + std::to_string(v) +
                          " out of range (" + std::to_string(num_values) + " values)");
      }
      ins.outputs.push_back(v);
    }
    plan->max_stack_ = std::max({plan->max_stack_, ins.args.size(), ins.outputs.size()});
    plan->instructions_.push_back(std::move(ins));
  }

  // Liveness: a value dies after the last instruction reading it, or right after the one
  // defining it when nothing reads it. Graph inputs and outputs are never released.
  constexpr size_t kNever = static_cast<size_t>(-1);
  std::vector<size_t> last(num_values, kNever);
  std::vector<ValueId> used;
  for (size_t i = 0; i < plan->instructions_.size(); ++i) {
    const Instruction& ins = plan->instructions_[i];
    for (ValueId v : ins.outputs) {
      if (last[v] == kNever) last[v] = i;
    }
    used.clear();
    for (const PlannedArg& a : ins.args) collect_slots(a, used);
    for (ValueId v : used) last[v] = i;
  }
  std::vector<bool> pinned(num_values, false);
  for (ValueId v : plan->input_slots_) pinned[v] = true;
  for (int64_t v : plan->output_slots_) {
    if (v >= 0) pinned[v] = true;
  }
  for (ValueId v = 0; v < num_values; ++v) {
    if (!pinned[v] && last[v] != kNever) plan->instructions_[last[v]].release.push_back(v);
  }
  plan->program_ = std::move(program);
  return plan;
}

}  // namespace pt2rt
