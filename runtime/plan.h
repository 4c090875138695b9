// runtime/plan.h — one graph compiled into a flat instruction list over value slots.
//
// Built once at load (ExecutionPlan::build): every node's op is already resolved
// (op_resolution.h) and its arguments pre-converted against the runtime schema
// (argument_conversion.h). A value's slot is its value id. Each instruction lists the slots
// whose last use it is; they are released right after it runs (graph inputs, owned by the
// caller, and graph outputs excepted).
//
// Per call (ExecutionPlan::run): a Frame (slots + one reusable stack) is the only state;
// for each instruction the stack is filled from constants and slots, the op is called
// boxed (c10::OperatorHandle::callBoxed, or a native kernel), the results are moved into
// their slots and the dead slots released. No string or map lookup happens per call, so
// one immutable plan can be run by many threads at once, each with its own frame.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <vector>

#include "argument_conversion.h"
#include "native_ops.h"
#include "op_resolution.h"
#include "pt2rt/program.h"

namespace pt2rt {

struct Instruction {
  std::optional<c10::OperatorHandle> op;  ///< dispatcher op, or
  NativeKernel native = nullptr;          ///< a pt2rt native kernel
  std::vector<PlannedArg> args;           ///< one per schema argument
  std::vector<ValueId> outputs;           ///< slot per returned element
  std::vector<ValueId> release;           ///< slots dead after this instruction
  uint32_t node = 0;                      ///< index into Graph::nodes (for errors)
  /// Checks of the results after each call (result_check.h): kCheckViews for ops whose schema
  /// returns an alias of an argument (a view must lie inside its storage, whatever strides
  /// the caller's inputs have); kCheckDeclared for ops the meta device could not verify at
  /// load (dtype and sizes must be the declared ones).
  uint8_t checks = 0;
  static constexpr uint8_t kCheckViews = 1;
  static constexpr uint8_t kCheckDeclared = 2;
  /// With kCheckDeclared: the CPU bytes the call may allocate (allocation_cap.h).
  uint64_t alloc_cap = 0;
};

/// Per-call state of one plan execution.
struct Frame {
  std::vector<c10::IValue> slots;
  torch::jit::Stack stack;
};

class ExecutionPlan {
 public:
  /// Compiles `graph` (which must belong to `program`) for `device`.
  /// @param ops  resolve_operators(*program), shared by every graph of the program.
  /// @param report  where version differences go (see op_resolution.h): nodes of unresolved
  ///   ops are skipped, and arguments or output counts that do not fit a running schema which
  ///   differs from the recorded one are recorded there instead of thrown. The plan is then
  ///   incomplete: the caller throws the report when it is not empty.
  /// @throws FormatError: an argument does not fit the runtime schema, a node's output count
  ///   differs from the schema's returns, a graph output refers to an unknown value.
  static std::unique_ptr<ExecutionPlan> build(std::shared_ptr<const Program> program,
                                              const Graph& graph,
                                              const std::vector<ResolvedOp>& ops,
                                              c10::Device device,
                                              ResolutionReport* report = nullptr);

  /// Runs the graph. `inputs[i]` binds Graph::inputs[i] (moved into the frame).
  /// @returns one IValue per Graph::outputs entry (None for an output of value -1).
  /// @throws ExecutionError wrapping a kernel's error with the node, op, argument metas and
  ///   the export stack trace.
  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) const;

  const Graph& graph() const { return *graph_; }
  const Program& program() const { return *program_; }
  c10::Device device() const { return device_; }
  const std::vector<Instruction>& instructions() const { return instructions_; }
  /// Makes every run check instruction `i`'s results against the declared metas and cap its
  /// CPU allocations at `alloc_cap` bytes (Instruction::kCheckDeclared; meta_check.h sets it
  /// for ops without a Meta kernel).
  void check_results_of(size_t i, uint64_t alloc_cap) {
    instructions_.at(i).checks |= Instruction::kCheckDeclared;
    instructions_.at(i).alloc_cap = alloc_cap;
  }
  size_t num_slots() const { return graph_->values.size(); }

  /// Pushes `ins`'s arguments, read from `slots`, onto `stack` (benchmarks use this to
  /// prebuild stacks; run() uses it per instruction).
  static void push_arguments(const Instruction& ins, const std::vector<c10::IValue>& slots,
                             torch::jit::Stack& stack);

 private:
  ExecutionPlan() = default;
  [[noreturn]] void raise_execution_error(const Instruction& ins, const Frame& frame,
                                          const std::string& message) const;

  std::shared_ptr<const Program> program_;
  const Graph* graph_ = nullptr;
  c10::Device device_ = c10::kCPU;
  std::vector<Instruction> instructions_;
  std::vector<ValueId> input_slots_;
  std::vector<int64_t> output_slots_;
  size_t max_stack_ = 0;
};

}  // namespace pt2rt
