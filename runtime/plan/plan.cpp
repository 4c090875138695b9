// runtime/plan/plan.cpp — building an ExecutionPlan (see plan.h); running it is interpreter.cpp.
#include "plan/plan.h"

#include <algorithm>
#include <set>
#include <string>

#include "plan/fuse_batch_norm_stats.h"
#include "plan/prepack_convolutions.h"
#include "plan/prepack_linears.h"
#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

std::string graph_where(const Graph& graph, size_t node) {
  return std::string("graph ") + to_string(graph.role) + ", node " + std::to_string(node);
}

bool hoistable(const Instruction& ins, bool computed);

/// What is computed from weights alone, in graph order: `values` per slot (the inputs flagged
/// in `cacheable_inputs`, one flag per `input_slots` entry, and the results of such
/// instructions), `instructions` per instruction (it reads at least one slot, every slot it
/// reads is such a value, and it is hoistable(ins, computed)).
struct WeightOnly {
  std::vector<bool> values, instructions;
};

WeightOnly weight_only_work(const std::vector<Instruction>& instructions,
                            const std::vector<ValueId>& input_slots,
                            const std::vector<bool>& cacheable_inputs, size_t num_values,
                            bool computed) {
  WeightOnly w{std::vector<bool>(num_values, false),
               std::vector<bool>(instructions.size(), false)};
  for (size_t i = 0; i < input_slots.size() && i < cacheable_inputs.size(); ++i) {
    w.values[input_slots[i]] = cacheable_inputs[i];
  }
  std::vector<ValueId> used;
  for (size_t k = 0; k < instructions.size(); ++k) {
    const Instruction& ins = instructions[k];
    used.clear();
    for (const PlannedArg& a : ins.args) collect_slots(a, used);
    bool only = !used.empty() && hoistable(ins, computed);
    for (ValueId v : used) only = only && w.values[v];
    if (!only) continue;
    w.instructions[k] = true;
    for (ValueId v : ins.outputs) w.values[v] = true;
  }
  return w;
}

}  // namespace

std::unique_ptr<ExecutionPlan> ExecutionPlan::build(std::shared_ptr<const Program> program,
                                                    const Graph& graph,
                                                    const std::vector<ResolvedOp>& ops,
                                                    c10::Device device,
                                                    const PlanOptions& options,
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
    ins.native = rop.native;
    ins.node = static_cast<uint32_t>(i);
    for (const c10::Argument& r : schema.returns()) {
      if (r.alias_info() != nullptr) ins.checks |= Instruction::kCheckViews;
    }
    ins.mutates = schema.is_mutable();
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

  // A training-mode BatchNorm's running statistics by its own kernel (batch_norm_stats.h); the
  // meta check's plan keeps the graph as written, node by node.
  if (device.type() != c10::DeviceType::Meta && fuse_batch_norm_stats(plan->instructions_, graph) > 0) {
    plan->max_stack_ = std::max<size_t>(plan->max_stack_, 9);
  }
  // An inference plan's oneDNN convolutions and linear layers on weights packed once
  // (conv_prepack.h, linear_prepack.h), timed against ATen's kernels when asked
  // (onednn_benchmark.h: one budget for the plan).
  if (device.is_cpu() && options.inference_only && !options.cacheable_inputs.empty() &&
      options.cacheable_inputs.size() == graph.inputs.size()) {
    const std::vector<bool> weight_only =
        weight_only_work(plan->instructions_, plan->input_slots_, options.cacheable_inputs,
                         num_values, /*computed=*/true)
            .values;
    OneDnnBenchmark benchmark(options.onednn_budget);
    prepack_convolutions(plan->instructions_, graph, weight_only, options.onednn_choice,
                         benchmark);
    prepack_linears(plan->instructions_, graph, weight_only, options.onednn_choice, benchmark);
  }
  plan->program_ = std::move(program);
  plan->finalize(options);
  return plan;
}

std::unique_ptr<ExecutionPlan> ExecutionPlan::specialize(const PlanOptions& options) const {
  std::unique_ptr<ExecutionPlan> plan(new ExecutionPlan());
  plan->program_ = program_;
  plan->graph_ = graph_;
  plan->device_ = device_;
  plan->instructions_ = prologue_;  // hoisted instructions come first in topological order
  plan->instructions_.insert(plan->instructions_.end(), instructions_.begin(), instructions_.end());
  plan->input_slots_ = input_slots_;
  plan->output_slots_ = output_slots_;
  plan->max_stack_ = max_stack_;
  plan->finalize(options);
  return plan;
}

void ExecutionPlan::finalize(const PlanOptions& options) {
  const size_t num_values = graph_->values.size();
  const size_t num_outputs = output_slots_.size();
  if (!options.needed_outputs.empty() && options.needed_outputs.size() != num_outputs) {
    throw FormatError(std::string("graph ") + to_string(graph_->role) + ": " +
                      std::to_string(options.needed_outputs.size()) +
                      " needed-output flags for " + std::to_string(num_outputs) + " outputs");
  }
  options_ = options;
  auto output_needed = [&](size_t j) {
    return output_slots_[j] >= 0 && (options.needed_outputs.empty() || options.needed_outputs[j]);
  };

  // Dead-code elimination, last instruction first: an instruction stays when it computes a
  // needed value or writes an argument.
  std::vector<bool> needed(num_values, false);
  for (size_t j = 0; j < num_outputs; ++j) {
    if (output_needed(j)) needed[static_cast<size_t>(output_slots_[j])] = true;
  }
  std::vector<ValueId> used;
  std::vector<bool> keep(instructions_.size(), false);
  for (size_t i = instructions_.size(); i-- > 0;) {
    const Instruction& ins = instructions_[i];
    bool live = ins.mutates;
    for (ValueId v : ins.outputs) live = live || needed[v];
    if (!live) continue;
    keep[i] = true;
    used.clear();
    for (const PlannedArg& a : ins.args) collect_slots(a, used);
    for (ValueId v : used) needed[v] = true;
  }
  std::vector<Instruction> kept;
  kept.reserve(instructions_.size());
  for (size_t i = 0; i < instructions_.size(); ++i) {
    if (!keep[i]) continue;
    kept.push_back(std::move(instructions_[i]));
    kept.back().release.clear();
  }
  instructions_ = std::move(kept);
  prologue_.clear();
  prologue_input_slots_.clear();
  cached_slots_.clear();
  if (!options.cacheable_inputs.empty()) hoist_weight_work(options.cacheable_inputs);
  const size_t n = instructions_.size();

  // Where each value is defined (instruction index), kInput for graph inputs and cached
  // prologue results (both are in the frame when the first instruction runs).
  constexpr int64_t kInput = -1, kNowhere = -2;
  std::vector<int64_t> defined(num_values, kNowhere);
  for (ValueId v : input_slots_) defined[v] = kInput;
  for (ValueId v : cached_slots_) defined[v] = kInput;
  for (size_t i = 0; i < n; ++i) {
    for (ValueId v : instructions_[i].outputs) {
      if (defined[v] == kNowhere) defined[v] = static_cast<int64_t>(i);
    }
  }

  // Segments: one, or (deliver_early) one ending after each instruction that computes a
  // needed output.
  std::vector<int64_t> point(num_outputs, kNowhere);  // delivery point per output
  std::vector<bool> delivering(n, false);
  for (size_t j = 0; j < num_outputs; ++j) {
    if (!output_needed(j)) continue;
    const int64_t d = defined[static_cast<size_t>(output_slots_[j])];
    point[j] = d >= 0 ? d : kInput;
    if (d >= 0) delivering[static_cast<size_t>(d)] = true;
  }
  segments_.clear();
  std::vector<uint32_t> segment_of(n, 0);
  uint32_t begin = 0;
  for (size_t i = 0; i < n; ++i) {
    // Every output-computing instruction ends a segment: merging consecutive ones would keep
    // the first one's outputs alive while the next runs (e.g. a downsample convolution's
    // weight gradient during the next, larger convolution backward).
    const bool cut = options.deliver_early && delivering[i];
    if (cut || i + 1 == n) {
      Segment seg;
      seg.begin = begin;
      seg.end = static_cast<uint32_t>(i + 1);
      for (size_t k = begin; k <= i; ++k) segment_of[k] = static_cast<uint32_t>(segments_.size());
      segments_.push_back(std::move(seg));
      begin = static_cast<uint32_t>(i + 1);
    }
  }
  if (segments_.empty()) segments_.push_back(Segment{});  // no instructions at all

  // Last read of every value (instruction index), and deliveries in output order.
  std::vector<int64_t> last_read(num_values, kNowhere);
  for (size_t i = 0; i < n; ++i) {
    used.clear();
    for (const PlannedArg& a : instructions_[i].args) collect_slots(a, used);
    for (ValueId v : used) last_read[v] = static_cast<int64_t>(i);
  }
  std::vector<int64_t> last_delivery(num_values, -1);  // output index of a slot's last delivery
  for (size_t j = 0; j < num_outputs; ++j) {
    if (point[j] == kNowhere) continue;
    const uint32_t s = point[j] >= 0 ? segment_of[static_cast<size_t>(point[j])] : 0;
    const auto slot = static_cast<ValueId>(output_slots_[j]);
    segments_[s].deliveries.push_back(Delivery{static_cast<uint32_t>(j), slot, false});
  }
  // A delivery moves the value out when it is the slot's last delivery and no instruction
  // after its segment reads the slot.
  for (Segment& seg : segments_) {
    for (Delivery& d : seg.deliveries) last_delivery[d.slot] = d.output;
  }
  std::vector<bool> moved(num_values, false);
  for (Segment& seg : segments_) {
    for (Delivery& d : seg.deliveries) {
      d.move = last_delivery[d.slot] == static_cast<int64_t>(d.output) &&
               last_read[d.slot] < static_cast<int64_t>(seg.end);
      if (d.move) moved[d.slot] = true;
    }
  }

  input_used_.assign(input_slots_.size(), false);
  for (size_t i = 0; i < input_slots_.size(); ++i) {
    const ValueId v = input_slots_[i];
    input_used_[i] = last_read[v] != kNowhere || last_delivery[v] >= 0 ||
                     std::find(prologue_input_slots_.begin(), prologue_input_slots_.end(), v) !=
                         prologue_input_slots_.end();
  }

  // Releases: after the last read, unless a delivery moves the value out later.
  release_at_start_.clear();
  for (ValueId v = 0; v < num_values; ++v) {
    if (defined[v] == kNowhere) continue;
    // A moving delivery comes after every read: nothing to release.
    if (moved[v]) continue;
    const int64_t at = last_read[v] != kNowhere ? last_read[v] : defined[v];
    if (at == kInput) release_at_start_.push_back(v);
    else instructions_[static_cast<size_t>(at)].release.push_back(v);
  }
  mark_in_place();
}

void ExecutionPlan::mark_in_place() {
  for (Instruction& ins : instructions_) {
    ins.inplace.reset();
    if (!ins.op || ins.native || ins.mutates || ins.args.empty() ||
        ins.args[0].kind != PlannedArg::Kind::Slot) {
      continue;
    }
    const ValueId self = ins.args[0].slot;
    if (std::find(ins.release.begin(), ins.release.end(), self) == ins.release.end()) continue;
    std::optional<InplaceTwin> twin = inplace_twin(*ins.op);
    if (!twin || (twin->binary && ins.args.size() < 2)) continue;
    ins.inplace = std::move(twin);
  }
}

namespace {

/// Ops hoisted out of the per-call path when they read only weights: pure, deterministic,
/// cheap to keep (views, elementwise arithmetic, copies). Anything else (random ops, ops
/// with effects, ops this list does not know) stays per call.
const std::set<std::string>& hoistable_ops() {
  static const std::set<std::string> ops{
      "aten::t", "aten::view", "aten::_reshape_alias", "aten::reshape", "aten::expand",
      "aten::permute", "aten::transpose", "aten::unsqueeze", "aten::squeeze", "aten::alias",
      "aten::detach", "aten::select", "aten::slice", "aten::flatten", "aten::contiguous",
      "aten::clone", "aten::_to_copy", "aten::to", "aten::add", "aten::sub", "aten::mul",
      "aten::div", "aten::neg", "aten::rsqrt", "aten::sqrt", "aten::reciprocal", "aten::pow"};
  return ops;
}

/// The ops of hoistable_ops() whose result always aliases their input's memory: cached, they
/// still read the weights' current values, however the weights were written.
const std::set<std::string>& view_ops() {
  static const std::set<std::string> ops{
      "aten::t", "aten::view", "aten::_reshape_alias", "aten::expand", "aten::permute",
      "aten::transpose", "aten::unsqueeze", "aten::squeeze", "aten::alias", "aten::detach",
      "aten::select", "aten::slice"};
  return ops;
}

/// An op of view_ops(), or with `computed` of hoistable_ops() or a weight packing
/// (Instruction::packs: conv_prepack.h, linear_prepack.h).
bool hoistable(const Instruction& ins, bool computed) {
  if (ins.native) return computed && ins.packs;
  if (!ins.op || ins.mutates) return false;
  const std::string& name = ins.op->schema().name();
  return computed ? hoistable_ops().count(name) > 0 : view_ops().count(name) > 0;
}

}  // namespace

void ExecutionPlan::hoist_weight_work(const std::vector<bool>& cacheable_inputs) {
  if (cacheable_inputs.size() != input_slots_.size()) {
    throw FormatError(std::string("graph ") + to_string(graph_->role) + ": " +
                      std::to_string(cacheable_inputs.size()) + " cacheable-input flags for " +
                      std::to_string(input_slots_.size()) + " inputs");
  }
  const size_t num_values = graph_->values.size();
  const std::vector<bool> hoist = weight_only_work(instructions_, input_slots_, cacheable_inputs,
                                                   num_values, options_.inference_only)
                                      .instructions;
  std::vector<bool> is_input(num_values, false);
  std::vector<bool> from_prologue(num_values, false), read_by_prologue(num_values, false);
  for (ValueId v : input_slots_) is_input[v] = true;
  std::vector<Instruction> main;
  std::vector<ValueId> used;
  for (size_t k = 0; k < instructions_.size(); ++k) {
    Instruction& ins = instructions_[k];
    if (!hoist[k]) {
      main.push_back(std::move(ins));
      continue;
    }
    used.clear();
    for (const PlannedArg& a : ins.args) collect_slots(a, used);
    for (ValueId v : used) read_by_prologue[v] = true;
    for (ValueId v : ins.outputs) from_prologue[v] = true;
    prologue_.push_back(std::move(ins));
  }
  instructions_ = std::move(main);
  if (prologue_.empty()) return;
  std::vector<bool> cached(num_values, false);
  for (const Instruction& ins : instructions_) {
    used.clear();
    for (const PlannedArg& a : ins.args) collect_slots(a, used);
    for (ValueId v : used) cached[v] = cached[v] || from_prologue[v];
  }
  for (int64_t v : output_slots_) {
    if (v >= 0 && from_prologue[static_cast<size_t>(v)]) cached[static_cast<size_t>(v)] = true;
  }
  for (ValueId v = 0; v < num_values; ++v) {
    if (cached[v]) cached_slots_.push_back(v);
    if (read_by_prologue[v] && is_input[v]) prologue_input_slots_.push_back(v);
  }
}

}  // namespace pt2rt
