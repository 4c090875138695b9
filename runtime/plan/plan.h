// runtime/plan/plan.h — one graph compiled into a flat instruction list over value slots.
//
// Built once at load (ExecutionPlan::build): every node's op is already resolved
// (op_resolution.h) and its arguments pre-converted against the runtime schema
// (argument_conversion.h). A value's slot is its value id. On a real device (not the meta
// check's plan) a training BatchNorm's running-statistics arithmetic becomes one native
// instruction (batch_norm_stats.h).
//
// PlanOptions specialise a plan (ExecutionPlan::specialize, also at load or once per
// training specialisation, never per call):
//   needed_outputs  graph outputs not needed are not computed (they come back as None) and
//                   every instruction only they needed is removed (dead-code elimination;
//                   ops with a mutable schema argument are never removed);
//   deliver_early   the plan is cut into segments: a segment ends right after each
//                   instruction computing a graph output, and that output is handed out
//                   when the segment ends (the backward plan hands each gradient to autograd
//                   as soon as it exists: backward_chain.h);
//   cacheable_inputs  graph inputs bound to model weights: instructions that read only those
//                   (transitively) and are known pure and deterministic (views, elementwise
//                   arithmetic: hoistable_ops in plan.cpp) are hoisted into a prologue whose
//                   results are cached until a weight changes (weight_cache.h) — e.g. `t(W)`
//                   of a linear layer; with inference_only also computed values, e.g.
//                   BatchNorm folded into convolution weights, packed oneDNN weights.
// Liveness: each instruction lists the slots whose last use it is, released right after it
// runs; an elementwise op whose input dies at it may run in place (reinplace.h). Graph inputs
// are owned by the frame (moved in) and released after their last use too; an output is
// released (moved out) when it is delivered, unless a later instruction still reads it.
//
// Per call (ExecutionPlan::run, or start + run_segment per segment): a Frame (slots + one
// reusable stack) is the only state; for each instruction the stack is filled from
// constants and slots, the op is called boxed (c10::OperatorHandle::callBoxed, or a native
// kernel), the results are moved into their slots and the dead slots released. No string or
// map lookup happens per call, so one immutable plan can be run by many threads at once,
// each with its own frame.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <vector>

#include "kernels/native_ops.h"
#include "plan/argument_conversion.h"
#include "plan/onednn_benchmark.h"
#include "plan/op_resolution.h"
#include "plan/reinplace.h"
#include "plan/weight_cache.h"
#include "pt2rt/program.h"

namespace pt2rt {

struct Instruction {
  std::optional<c10::OperatorHandle> op;  ///< dispatcher op, or
  const NativeOp* native = nullptr;       ///< a pt2rt native op (its schema and kernel)
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
  bool mutates = false;                   ///< the schema writes an argument (never removed)
  /// Puts a packed form of a value into that value's slot (conv_prepack.h, linear_prepack.h):
  /// its result is not the declared tensor, so check_results_of() never marks it; hoisted
  /// into the cached prologue like the weight-only work it reads.
  bool packs = false;
  /// Set by finalize() when the op has an in-place twin and its `self` slot (argument 0)
  /// dies here: the twin runs when can_run_in_place() holds for the call (reinplace.h).
  std::optional<InplaceTwin> inplace;
};

/// Per-call state of one plan execution.
struct Frame {
  std::vector<c10::IValue> slots;
  torch::jit::Stack stack;
  size_t next_segment = 0;
};

/// Which kernels an inference_only CPU plan runs its eligible float32 2-D convolutions
/// (conv_prepack.h) and linear layers (`addmm` / `mm` on a weight: linear_prepack.h) with.
enum class OneDnnChoice : uint8_t {
  Aten,       ///< ATen's own: convolutions ATen runs on oneDNN get a packed weight (its bits)
  Benchmark,  ///< also oneDNN where it times faster at plan build (onednn_benchmark.h)
  OneDnn,     ///< oneDNN on a packed weight for every eligible convolution and linear layer
};

/// How a plan is specialised (see the file comment).
struct PlanOptions {
  /// One flag per Graph::outputs entry; empty means every output is needed.
  std::vector<bool> needed_outputs;
  bool deliver_early = false;
  /// One flag per Graph::inputs entry: bound to a model weight; empty means none.
  std::vector<bool> cacheable_inputs;
  /// The plan belongs to a LoadOptions::inference_only load, whose weights pt2rt never
  /// trains. With cacheable_inputs: (1) values *computed* from weights (folded BatchNorm
  /// weights, `contiguous`, arithmetic) are cached too — otherwise only views of weights are
  /// (`t(W)`, `view`, ...: they read the weights' memory at every call), because torch::optim
  /// updates parameters through `Tensor::data()`, which no version counter shows
  /// (weight_cache.h); (2) on CPU, 2-D convolutions ATen runs through oneDNN get their weights
  /// packed once in the cached prologue (conv_prepack.h).
  bool inference_only = false;
  /// With inference_only on CPU: which eligible convolutions and linear layers go to oneDNN
  /// (LoadOptions::onednn_benchmark sets Benchmark). Other than Aten, results differ from
  /// ATen's own kernels' by float rounding where oneDNN replaces them.
  OneDnnChoice onednn_choice = OneDnnChoice::Aten;
  /// With Benchmark: what the timing may spend (onednn_benchmark.h; Model::load derives it
  /// from the archive's run bounds).
  OneDnnBudget onednn_budget;
};

/// A graph output handed out at the end of a segment.
struct Delivery {
  uint32_t output;  ///< index into Graph::outputs
  ValueId slot;
  bool move;        ///< the frame's reference is moved out (nothing reads the slot later)
};

/// Instructions [begin, end) of the plan, then `deliveries`.
struct Segment {
  uint32_t begin = 0, end = 0;
  std::vector<Delivery> deliveries;
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
                                              const PlanOptions& options = {},
                                              ResolutionReport* report = nullptr);

  /// A copy of this plan specialised by `options` (instructions this plan removed stay
  /// removed). @throws FormatError when `options.needed_outputs` has the wrong length.
  std::unique_ptr<ExecutionPlan> specialize(const PlanOptions& options) const;

  /// Runs the graph. `inputs[i]` binds Graph::inputs[i] (moved into the frame).
  /// @returns one IValue per Graph::outputs entry (None for an output of value -1 or one
  ///   that is not needed).
  /// @throws ExecutionError wrapping a kernel's error with the node, op, argument metas and
  ///   the export stack trace.
  std::vector<c10::IValue> run(std::vector<c10::IValue> inputs) const;

  /// Segment-wise execution: start() binds the inputs into a new frame; run_segment() runs
  /// the frame's next segment and stores its deliveries into `outputs` (one entry per
  /// Graph::outputs, sized by the caller). Segments run in order, each once per frame.
  /// @throws InputError (wrong input count), ExecutionError as run().
  Frame start(std::vector<c10::IValue> inputs) const;
  void run_segment(Frame& frame, std::vector<c10::IValue>& outputs) const;

  const std::vector<Segment>& segments() const { return segments_; }
  /// Whether Graph::inputs[i] is read by an instruction or delivered as an output.
  bool input_used(size_t i) const { return input_used_[i]; }
  /// Instructions hoisted out of the per-call path (PlanOptions::cacheable_inputs).
  const std::vector<Instruction>& prologue() const { return prologue_; }
  const PlanOptions& options() const { return options_; }

  const Graph& graph() const { return *graph_; }
  const Program& program() const { return *program_; }
  c10::Device device() const { return device_; }
  const std::vector<Instruction>& instructions() const { return instructions_; }
  /// Makes every run check the results of the instructions of the given graph nodes (those
  /// this plan kept, in the main list or the cached prologue) against the declared metas and
  /// cap their CPU allocations (Instruction::kCheckDeclared; meta_check.h marks the ops
  /// without a Meta kernel). `caps`: (graph node, allocation cap in bytes). One pass over the
  /// plan, whatever the number of marks. Plans specialised later copy the marks.
  void check_results_of(const std::vector<std::pair<uint32_t, uint64_t>>& caps) {
    if (caps.empty()) return;
    std::vector<uint64_t> cap_of(graph_->nodes.size(), 0);
    std::vector<bool> marked(graph_->nodes.size(), false);
    for (const auto& [node, cap] : caps) {
      if (node >= cap_of.size()) continue;
      cap_of[node] = cap;
      marked[node] = true;
    }
    for (auto* list : {&prologue_, &instructions_}) {
      for (Instruction& ins : *list) {
        if (ins.packs || ins.node >= marked.size() || !marked[ins.node]) continue;
        ins.checks |= Instruction::kCheckDeclared;
        ins.alloc_cap = cap_of[ins.node];
      }
    }
  }
  size_t num_slots() const { return graph_->values.size(); }

  /// Pushes `ins`'s arguments, read from `slots`, onto `stack` (benchmarks use this to
  /// prebuild stacks; run() uses it per instruction).
  static void push_arguments(const Instruction& ins, const std::vector<c10::IValue>& slots,
                             torch::jit::Stack& stack);

 private:
  ExecutionPlan() = default;
  /// Dead-code elimination, hoisting, liveness and segments for `options` (build and
  /// specialize).
  void finalize(const PlanOptions& options);
  /// Marks the instructions that may run their in-place twin (Instruction::inplace).
  void mark_in_place();
  /// Moves weight-only instructions into prologue_ (see PlanOptions::cacheable_inputs).
  void hoist_weight_work(const std::vector<bool>& cacheable_inputs);
  /// Puts the prologue's results into `frame` (from the cache, computed if stale).
  void fill_cached(Frame& frame) const;
  /// Runs `ins` on `frame` (one instruction of the interpreter loop).
  void execute(const Instruction& ins, Frame& frame) const;
  [[noreturn]] void raise_execution_error(const Instruction& ins, const Frame& frame,
                                          const std::string& message) const;

  std::shared_ptr<const Program> program_;
  const Graph* graph_ = nullptr;
  c10::Device device_ = c10::kCPU;
  std::vector<Instruction> instructions_;
  std::vector<ValueId> input_slots_;
  std::vector<int64_t> output_slots_;
  std::vector<ValueId> release_at_start_;  ///< inputs nothing reads or delivers
  std::vector<bool> input_used_;
  std::vector<Instruction> prologue_;
  std::vector<ValueId> prologue_input_slots_;  ///< weight input slots the prologue reads
  std::vector<ValueId> cached_slots_;          ///< prologue results read after it
  std::unique_ptr<WeightCache> cache_ = std::make_unique<WeightCache>();
  std::vector<Segment> segments_;
  PlanOptions options_;
  size_t max_stack_ = 0;
};

}  // namespace pt2rt
