// runtime/exec/interpreter.cpp — running an ExecutionPlan (see plan.h) and wrapping kernel errors.
#include <c10/util/Exception.h>

#include <chrono>
#include <sstream>

#include "core/allocation_cap.h"
#include "core/result_check.h"
#include "core/tensor_format.h"
#include "plan/plan.h"
#include "pt2rt/errors.h"
#include "pt2rt/node_observer.h"

namespace pt2rt {
namespace {

/// The observed form of the interpreter loop: instructions [begin, end) of `list`, each
/// timed with what `execute` does (the kernel call and the releases after it) and reported,
/// then the whole range (pt2rt/node_observer.h).
template <typename Execute>
void run_observed(NodeObserver& observer, const Program& program, const Graph& graph,
                  const std::vector<Instruction>& list, uint32_t begin, uint32_t end,
                  bool prologue, Execute&& execute) {
  using Clock = std::chrono::steady_clock;
  auto ns = [](Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  };
  const auto plan_nodes = static_cast<uint32_t>(list.size());
  const Clock::time_point range_start = Clock::now();
  for (uint32_t i = begin; i < end; ++i) {
    const Clock::time_point t0 = Clock::now();
    execute(list[i]);
    const int64_t elapsed = ns(Clock::now() - t0);
    observer.on_node(NodeEvent{program, graph, list[i].node, i, plan_nodes, prologue, elapsed});
  }
  observer.on_range(graph, end - begin, prologue, ns(Clock::now() - range_start));
}

/// The most elements of any tensor argument of `ins` (its arguments are still in `slots`
/// right after the call): the size bound of a result whose shape depends on the device.
int64_t largest_argument(const Instruction& ins, const std::vector<c10::IValue>& slots) {
  torch::jit::Stack args;
  ExecutionPlan::push_arguments(ins, slots, args);
  return largest_tensor_numel(args);
}

}  // namespace

void ExecutionPlan::push_arguments(const Instruction& ins, const std::vector<c10::IValue>& slots,
                                   torch::jit::Stack& stack) {
  for (const PlannedArg& a : ins.args) {
    switch (a.kind) {
      case PlannedArg::Kind::Constant:
        stack.push_back(a.constant);
        break;
      case PlannedArg::Kind::Slot:
        stack.push_back(slots[a.slot]);
        break;
      case PlannedArg::Kind::TensorList: {
        c10::List<at::Tensor> list;
        list.reserve(a.elements.size());
        for (int64_t e : a.elements) list.push_back(slots[e].toTensor());
        stack.emplace_back(std::move(list));
        break;
      }
      case PlannedArg::Kind::OptionalTensorList: {
        c10::List<c10::optional<at::Tensor>> list;
        list.reserve(a.elements.size());
        for (int64_t e : a.elements) {
          if (e < 0) list.push_back(c10::nullopt);
          else list.push_back(slots[e].toTensor());
        }
        stack.emplace_back(std::move(list));
        break;
      }
      case PlannedArg::Kind::IntList: {
        std::vector<int64_t> list(a.elements.size());
        for (size_t i = 0; i < list.size(); ++i) {
          list[i] = a.element_is_slot[i] ? slots[a.elements[i]].toInt() : a.elements[i];
        }
        stack.emplace_back(std::move(list));
        break;
      }
    }
  }
}

Frame ExecutionPlan::start(std::vector<c10::IValue> inputs) const {
  if (inputs.size() != input_slots_.size()) {
    throw InputError(std::string("graph ") + to_string(graph_->role) + " takes " +
                     std::to_string(input_slots_.size()) + " inputs, got " +
                     std::to_string(inputs.size()));
  }
  Frame frame;
  frame.slots.resize(graph_->values.size());
  frame.stack.reserve(max_stack_);
  for (size_t i = 0; i < inputs.size(); ++i) frame.slots[input_slots_[i]] = std::move(inputs[i]);
  if (!prologue_.empty()) fill_cached(frame);
  for (ValueId v : release_at_start_) frame.slots[v] = c10::IValue();
  return frame;
}

void ExecutionPlan::fill_cached(Frame& frame) const {
  std::shared_ptr<const WeightCache::Values> values =
      cache_->get(frame.slots, prologue_input_slots_, [&] {
        Frame tmp;
        tmp.slots.resize(graph_->values.size());
        tmp.stack.reserve(max_stack_);
        for (ValueId v : prologue_input_slots_) tmp.slots[v] = frame.slots[v];
        if (NodeObserver* observer = installed_node_observer()) {
          run_observed(*observer, *program_, *graph_, prologue_, 0,
                       static_cast<uint32_t>(prologue_.size()), true,
                       [&](const Instruction& ins) { execute(ins, tmp); });
        } else {
          for (const Instruction& ins : prologue_) execute(ins, tmp);
        }
        WeightCache::Values out;
        out.reserve(cached_slots_.size());
        for (ValueId v : cached_slots_) out.push_back(tmp.slots[v]);
        return out;
      });
  for (size_t k = 0; k < cached_slots_.size(); ++k) frame.slots[cached_slots_[k]] = (*values)[k];
}

void ExecutionPlan::execute(const Instruction& ins, Frame& frame) const {
  const c10::OperatorHandle* op = ins.op ? &*ins.op : nullptr;
  if (ins.inplace) {  // decided before the stack takes its own references
    const c10::IValue* other = nullptr;
    if (ins.inplace->binary) {  // mark_in_place() checked that argument 1 exists
      const PlannedArg& o = ins.args[1];
      if (o.kind == PlannedArg::Kind::Slot) other = &frame.slots[o.slot];
      else if (o.kind == PlannedArg::Kind::Constant) other = &o.constant;
    }
    if (can_run_in_place(*ins.inplace, frame.slots[ins.args[0].slot], other)) {
      op = &ins.inplace->op;
    }
  }
  frame.stack.clear();
  push_arguments(ins, frame.slots, frame.stack);
  try {
    if (ins.checks & Instruction::kCheckDeclared) {
      AllocationCap cap(ins.alloc_cap);
      if (ins.native) ins.native->kernel(frame.stack);
      else op->callBoxed(frame.stack);
    } else if (ins.native) {
      ins.native->kernel(frame.stack);
    } else {
      op->callBoxed(frame.stack);
    }
  } catch (const c10::Error& e) {
    raise_execution_error(ins, frame, e.what_without_backtrace());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    raise_execution_error(ins, frame, e.what());
  }
  if (frame.stack.size() != ins.outputs.size()) {
    raise_execution_error(ins, frame,
                          "the kernel returned " + std::to_string(frame.stack.size()) +
                              " values, expected " + std::to_string(ins.outputs.size()));
  }
  if (ins.checks != 0) {
    for (size_t j = 0; j < ins.outputs.size(); ++j) {
      const Value& value = graph_->values[ins.outputs[j]];
      const std::string problem =
          (ins.checks & Instruction::kCheckDeclared)
              ? check_result(value, frame.stack[j], CheckAt::Run, nullptr,
                             value.device_dependent_shape ? largest_argument(ins, frame.slots) : 0)
              : check_storage(frame.stack[j]);
      if (!problem.empty()) {
        raise_execution_error(ins, frame, "result " + std::to_string(j) + " " + problem);
      }
    }
  }
  for (size_t j = 0; j < ins.outputs.size(); ++j) {
    frame.slots[ins.outputs[j]] = std::move(frame.stack[j]);
  }
  for (ValueId v : ins.release) frame.slots[v] = c10::IValue();
}

void ExecutionPlan::run_segment(Frame& frame, std::vector<c10::IValue>& outputs) const {
  const Segment& seg = segments_[frame.next_segment++];
  if (NodeObserver* observer = installed_node_observer()) {  // the one load per segment
    run_observed(*observer, *program_, *graph_, instructions_, seg.begin, seg.end, false,
                 [&](const Instruction& ins) { execute(ins, frame); });
  } else {
    for (uint32_t i = seg.begin; i < seg.end; ++i) execute(instructions_[i], frame);
  }
  frame.stack.clear();
  for (const Delivery& d : seg.deliveries) {
    if (d.move) outputs[d.output] = std::move(frame.slots[d.slot]);
    else outputs[d.output] = frame.slots[d.slot];
  }
}

std::vector<c10::IValue> ExecutionPlan::run(std::vector<c10::IValue> inputs) const {
  Frame frame = start(std::move(inputs));
  std::vector<c10::IValue> outputs(output_slots_.size());
  while (frame.next_segment < segments_.size()) run_segment(frame, outputs);
  return outputs;
}

void ExecutionPlan::raise_execution_error(const Instruction& ins, const Frame& frame,
                                          const std::string& message) const {
  const Node& node = graph_->nodes[ins.node];
  const Operator& op = program_->operators[node.op];
  NodeContext ctx{*program_, *graph_, ins.node, op, device_};
  const c10::FunctionSchema& schema = ins.native ? ins.native->schema : ins.op->schema();

  std::ostringstream os;
  os << ctx.describe() << " failed: " << message << "\n  arguments:";
  for (size_t j = 0; j < ins.args.size(); ++j) {
    const PlannedArg& a = ins.args[j];
    os << "\n    " << (j < schema.arguments().size() ? schema.arguments()[j].name() : "?")
       << ": ";
    switch (a.kind) {
      case PlannedArg::Kind::Constant:
        os << describe_ivalue(a.constant);
        break;
      case PlannedArg::Kind::Slot:
        os << describe_ivalue(frame.slots[a.slot]) << "  (value '"
           << graph_->values[a.slot].name << "')";
        break;
      case PlannedArg::Kind::TensorList:
      case PlannedArg::Kind::OptionalTensorList:
        os << "[";
        for (size_t k = 0; k < a.elements.size(); ++k) {
          os << (k ? ", " : "")
             << (a.elements[k] < 0 ? std::string("None")
                                   : describe_ivalue(frame.slots[a.elements[k]]));
        }
        os << "]";
        break;
      case PlannedArg::Kind::IntList:
        os << "[";
        for (size_t k = 0; k < a.elements.size(); ++k) {
          os << (k ? ", " : "");
          if (a.element_is_slot[k]) os << describe_ivalue(frame.slots[a.elements[k]]);
          else os << a.elements[k];
        }
        os << "]";
        break;
    }
  }
  if (!node.debug.module_fqn.empty()) os << "\n  module: " << node.debug.module_fqn;
  if (!node.debug.stack_trace.empty()) {
    os << "\n  exported from (Python stack trace at export):\n" << node.debug.stack_trace;
  } else {
    os << "\n  (no Python stack trace was recorded at export)";
  }
  throw ExecutionError(os.str());
}

}  // namespace pt2rt
