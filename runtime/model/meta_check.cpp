// runtime/model/meta_check.cpp — see meta_check.h.
#include "model/meta_check.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/allocation_cap.h"
#include "core/meta_memo.h"
#include "core/result_check.h"
#include "core/run_cost.h"
#include "core/sym_eval.h"
#include "core/tensor_format.h"
#include "model/call_bounds.h"
#include "plan/plan.h"
#include "pt2rt/errors.h"
#include "pt2rt/text.h"

namespace pt2rt {
namespace {

const c10::Device kMeta(c10::DeviceType::Meta);

/// The dims at the symbol values the meta run uses (the range maxima: sym_eval.h).
std::vector<int64_t> dims_at(const std::vector<Dim>& dims, const std::vector<int64_t>& symbols) {
  std::vector<int64_t> out;
  out.reserve(dims.size());
  for (const Dim& d : dims) {
    std::optional<int64_t> v = dim_value(d, symbols);
    if (!v) throw FormatError("program.fb: a symbolic size overflows int64 at the range maxima");
    out.push_back(*v);
  }
  return out;
}

/// A meta tensor with `meta`'s dtype, sizes and strides (contiguous when none are declared),
/// symbolic dims evaluated at `symbols`.
at::Tensor meta_tensor(const TensorMeta& m, const std::vector<int64_t>& symbols) {
  const auto options = at::TensorOptions().dtype(m.dtype).device(kMeta);
  if (m.strides.size() != m.sizes.size()) return at::empty(dims_at(m.sizes, symbols), options);
  return at::empty_strided(dims_at(m.sizes, symbols), dims_at(m.strides, symbols), options);
}

/// A meta tensor laid out like the real weight `t` (sizes, strides, offset, storage bytes).
at::Tensor meta_like(const at::Tensor& t) {
  const auto options = at::TensorOptions().dtype(t.scalar_type()).device(kMeta);
  const int64_t numel = static_cast<int64_t>(t.storage().nbytes() / t.element_size());
  return at::empty({numel}, options).as_strided(t.sizes(), t.strides(), t.storage_offset());
}

/// Live storages of one meta run: bytes held, and the peak.
class StorageLedger {
 public:
  void hold(const c10::IValue& v) { visit(v, +1); }
  void drop(const c10::IValue& v) { visit(v, -1); }
  uint64_t live() const { return live_; }

 private:
  void visit(const c10::IValue& v, int delta) {
    if (v.isTensor()) {
      count(v.toTensor(), delta);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) count(t, delta);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) count(e.toTensor(), delta);
      }
    }
  }
  void count(const at::Tensor& t, int delta) {
    if (!t.defined() || !t.has_storage()) return;
    const c10::StorageImpl* key = t.storage().unsafeGetStorageImpl();
    auto& entry = refs_[key];
    if (delta > 0) {
      if (entry.refs++ == 0) {
        entry.bytes = t.storage().nbytes();
        live_ = sat_add(live_, entry.bytes);
      }
    } else if (entry.refs > 0 && --entry.refs == 0) {
      live_ -= std::min(live_, entry.bytes);
      refs_.erase(key);
    }
  }
  struct Entry {
    uint64_t refs = 0;
    uint64_t bytes = 0;
  };
  std::unordered_map<const c10::StorageImpl*, Entry> refs_;
  uint64_t live_ = 0;
};

/// Storage bytes of the tensors in `stack` (each storage once).
uint64_t bytes_of(const torch::jit::Stack& stack) {
  StorageLedger ledger;
  for (const c10::IValue& v : stack) ledger.hold(v);
  return ledger.live();
}

// Ops found at run time to have no usable Meta kernel (a composite whose decomposition
// reaches one without): remembered per process, since a c10::Error's backtrace costs about a
// millisecond and big models repeat such ops many times.
std::mutex no_meta_mutex;
std::unordered_set<std::string> no_meta_ops;

std::string op_key(const c10::OperatorHandle& op) {
  return op.operator_name().name + "." + op.operator_name().overload_name;
}

bool runs_on_meta(const c10::OperatorHandle& op) {
  if (!op.hasComputedKernelForDispatchKey(c10::DispatchKey::Meta)) return false;
  std::lock_guard<std::mutex> lock(no_meta_mutex);
  return no_meta_ops.count(op_key(op)) == 0;
}

void remember_no_meta(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> lock(no_meta_mutex);
  no_meta_ops.insert(op_key(op));
}

/// One graph's meta run.
class MetaRun {
 public:
  MetaRun(const ModelState& state, const CompiledGraph& compiled, const std::vector<ResolvedOp>& ops,
          const std::vector<int64_t>& symbols, MetaMemo& memo)
      : state_(state), symbols_(symbols), memo_(memo), graph_(compiled.graph()),
        plan_(ExecutionPlan::build(state.program, graph_, ops, kMeta)) {}

  GraphCost run(std::vector<c10::IValue> inputs,
                std::vector<std::pair<uint32_t, uint64_t>>* unverified,
                std::vector<c10::IValue>* outputs) {
    const auto& instructions = plan_->instructions();
    std::vector<c10::IValue> slots(graph_.values.size());
    StorageLedger ledger;
    GraphCost cost;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const ValueId v = graph_.inputs[i].value;
      ledger.hold(inputs[i]);
      slots[v] = std::move(inputs[i]);
    }
    cost.peak_bytes = ledger.live();
    torch::jit::Stack stack;
    for (size_t i = 0; i < instructions.size(); ++i) {
      const Instruction& ins = instructions[i];
      stack.clear();
      ExecutionPlan::push_arguments(ins, slots, stack);
      const c10::FunctionSchema& schema = op_schema(ins);
      check_node_writes(ins, schema, stack);
      const torch::jit::Stack args = stack;
      bool verified = ins.native || runs_on_meta(*ins.op);
      try {
        if (!verified) {
          stack = declared_results(ins);  // no Meta kernel: checked per run
        } else if (ins.native) {
          ins.native->kernel(stack);
        } else {
          const std::optional<std::string> key =
              MetaMemo::pure(schema) ? MetaMemo::key(*ins.op, args) : std::nullopt;
          if (!key || !memo_.lookup(*key, stack)) {
            ins.op->callBoxed(stack);
            if (key) memo_.remember(*key, args, stack);
          }
        }
      } catch (const c10::NotImplementedError&) {
        // A composite op whose decomposition reaches an op without a Meta kernel.
        verified = false;
        remember_no_meta(*ins.op);
        stack = declared_results(ins);
      } catch (const c10::Error& e) {
        fail(ins, std::string("fails on the meta device: ") + e.what_without_backtrace());
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        fail(ins, std::string("fails on the meta device: ") + e.what());
      }
      if (stack.size() != ins.outputs.size()) {
        fail(ins, "returned " + std::to_string(stack.size()) + " values, expected " +
                      std::to_string(ins.outputs.size()));
      }
      if (verified) adopt_declared_device_dependent(ins, args, stack);
      for (size_t k = 0; k < ins.outputs.size(); ++k) {
        const std::string problem =
            check_result(graph_.values[ins.outputs[k]], stack[k], CheckAt::Load, &symbols_);
        if (!problem.empty()) fail(ins, "result " + std::to_string(k) + " " + problem);
      }
      NodeCost nc = node_cost(schema, args, stack);
      if (!verified) {
        // Its real kernel may allocate up to four times what its inputs and declared results
        // hold (temporaries, contiguous copies), plus its estimated scratch and 1 MiB; that
        // cap, with the weight reorders it may make on top (NodeCost::reorder_bytes), is
        // enforced per run, and counted here as scratch.
        const uint64_t cap =
            sat_add(sat_add(sat_mul(4, sat_add(bytes_of(args), bytes_of(stack))), nc.scratch_bytes),
                    uint64_t{1} << 20);
        unverified->emplace_back(instructions[i].node, sat_add(cap, nc.reorder_bytes));
        nc.scratch_bytes = std::max(nc.scratch_bytes, cap);
        ++cost.unverified;
      }
      cost.work = sat_add(cost.work, nc.work);
      for (size_t k = 0; k < ins.outputs.size(); ++k) {
        ledger.hold(stack[k]);
        ledger.drop(slots[ins.outputs[k]]);
        slots[ins.outputs[k]] = std::move(stack[k]);
      }
      cost.peak_bytes = std::max(cost.peak_bytes, sat_add(ledger.live(), nc.scratch_bytes));
      for (ValueId v : ins.release) {
        ledger.drop(slots[v]);
        slots[v] = c10::IValue();
      }
    }
    for (const GraphOutput& out : graph_.outputs) {
      outputs->push_back(out.value < 0 ? c10::IValue() : slots[static_cast<size_t>(out.value)]);
    }
    return cost;
  }

  const Graph& graph() const { return graph_; }

  [[noreturn]] void fail(const Instruction& ins, const std::string& what) const {
    const Node& node = graph_.nodes[ins.node];
    NodeContext ctx{*state_.program, graph_, ins.node, state_.program->operators[node.op], kMeta};
    throw FormatError("program.fb: " + ctx.describe() + ": " + what);
  }

 private:
  const c10::FunctionSchema& op_schema(const Instruction& ins) const {
    return ins.native ? ins.native->schema : ins.op->schema();
  }

  /// The writes the operator policy leaves to each node: an optional argument with a write
  /// annotation (`Tensor(a!)? running_mean`, LibTorch 2.x's batch norms) must be None — or, for
  /// a batch norm's `running_mean`/`running_var`, the node runs in eval mode
  /// (`training=False`), where the kernel only reads them. LibTorch 1.13's batch-norm ops
  /// overwrite those stats in training mode without any annotation: the same rule applies to
  /// arguments of those names. (The exporter passes None for them in training mode and
  /// returns the new stats as InputMutation outputs.)
  void check_node_writes(const Instruction& ins, const c10::FunctionSchema& schema,
                         const torch::jit::Stack& args) const {
    const auto& sargs = schema.arguments();
    if (schema.name() == "aten::index") {
      // Allowed despite its dynamic_output_shape tag (op_policy.cpp): its result sizes depend
      // on tensor data only for boolean masks, which are refused here.
      for (const c10::IValue& a : args) {
        if (!a.isList()) continue;
        for (const c10::IValue& e : a.toListRef()) {
          if (e.isTensor() && e.toTensor().defined() &&
              (e.toTensor().scalar_type() == at::kBool || e.toTensor().scalar_type() == at::kByte)) {
            fail(ins, "indexes with a boolean mask, whose result size depends on tensor data");
          }
        }
      }
    }
    int training = -1;
    for (size_t j = 0; j < sargs.size() && j < args.size(); ++j) {
      // `training` (native_batch_norm & co.) or `train` (native_batch_norm_backward, which
      // only reads the stats, in eval mode)
      if ((sargs[j].name() == "training" || sargs[j].name() == "train") && args[j].isBool()) {
        training = args[j].toBool();
      }
    }
    for (size_t j = 0; j < sargs.size() && j < args.size(); ++j) {
      const bool writes = sargs[j].alias_info() && sargs[j].alias_info()->isWrite();
      const bool stat = sargs[j].name() == "running_mean" || sargs[j].name() == "running_var";
      if (!(writes || stat) || !args[j].isTensor() || !args[j].toTensor().defined()) continue;
      if (stat && training == 0) continue;  // eval-mode batch norm only reads its stats
      fail(ins, "gets '" + sargs[j].name() + "'" + (stat ? " in training mode" : "") +
                    ", which the kernel overwrites" +
                    (writes ? "" : " although its schema does not say so") +
                    " (a graph's mutations must be InputMutation outputs)");
    }
  }

  /// Results whose shape depends on the device (Value::device_dependent_shape: eval-mode
  /// batch norms' save_mean/save_invstd, [0] on the CPU and [C] on CUDA and meta;
  /// _embedding_bag's offset2bag and max_indices) take their declared meta — what the
  /// exporting device made — when the meta kernel's differs, so the rest of the meta run (and
  /// a process that embeds Python, whose torch._decomp Meta kernels answer like CUDA) agrees
  /// with every device. check_result still checks their dtype and element bound.
  void adopt_declared_device_dependent(const Instruction& ins, const torch::jit::Stack& args,
                                       torch::jit::Stack& results) const {
    const int64_t largest = largest_tensor_numel(args);
    for (size_t k = 0; k < results.size() && k < ins.outputs.size(); ++k) {
      const Value& v = graph_.values[ins.outputs[k]];
      if (!v.device_dependent_shape || !v.meta || !results[k].isTensor()) continue;
      const at::Tensor& got = results[k].toTensor();
      if (!got.defined() ||
          !check_result(v, results[k], CheckAt::Load, &symbols_, largest).empty()) {
        continue;  // refused by the caller's check_result
      }
      results[k] = meta_tensor(*v.meta, symbols_);
    }
  }

  /// Meta results made from the declared metas of the node's outputs.
  torch::jit::Stack declared_results(const Instruction& ins) const {
    torch::jit::Stack out;
    for (ValueId id : ins.outputs) {
      const Value& v = graph_.values[id];
      if (v.kind == ValueKind::Tensor && v.meta) {
        try {
          out.emplace_back(meta_tensor(*v.meta, symbols_));
        } catch (const c10::Error& e) {
          fail(ins, "declares an invalid result shape (" + std::string(e.what_without_backtrace()) + ")");
        }
        continue;
      }
      if (v.kind == ValueKind::Tensor) {
        out.emplace_back(at::Tensor());  // declared as None: checked to stay so at run time
      } else if (v.kind == ValueKind::None) {
        out.emplace_back();
      } else {
        fail(ins, "has no Meta kernel and its result " + quoted(v.name, 64) + " is a " +
                      to_string(v.kind) + ", which cannot be bounded without one");
      }
    }
    return out;
  }

  const ModelState& state_;
  const std::vector<int64_t>& symbols_;
  MetaMemo& memo_;
  const Graph& graph_;
  std::unique_ptr<ExecutionPlan> plan_;
};

std::string figure(uint64_t v) { return v == UINT64_MAX ? "more than 2^64" : std::to_string(v); }

const char* const kRoles[3] = {"inference", "forward", "backward"};

/// Runs every compiled graph of `state` on the meta device at `symbols` (one value per
/// Program::symbols). `unverified` (optional) gets, per graph, the nodes to check per run.
/// With `early` (a program without a range to fall back on), a graph over its bounds throws
/// before the next one runs.
std::vector<GraphCost> run_graphs(const ModelState& state, const std::vector<ResolvedOp>& ops,
                                  const std::vector<int64_t>& symbols, const RunLimits* early,
                                  std::vector<std::vector<std::pair<uint32_t, uint64_t>>>* unverified) {
  // Meta kernels only: no autograd recording, no inference-mode tensors involved.
  c10::AutoGradMode no_grad(false);
  c10::InferenceMode not_inference(false);
  std::vector<at::Tensor> weights;
  weights.reserve(state.weights.size());
  for (const at::Tensor& w : state.weights) weights.push_back(meta_like(w));

  auto user_input = [&](const CompiledGraph& g, size_t i) -> c10::IValue {
    const Value& v = g.graph().values[g.graph().inputs[i].value];
    if (v.kind != ValueKind::Tensor || !v.meta) {
      throw FormatError("program.fb: graph '" + std::string(to_string(g.graph().role)) +
                        "': user input " + quoted(v.name, 64) + " declares no tensor shape");
    }
    try {
      return meta_tensor(*v.meta, symbols);
    } catch (const c10::Error& e) {
      throw FormatError("program.fb: graph '" + std::string(to_string(g.graph().role)) +
                        "': user input " + quoted(v.name, 64) + " has an invalid shape (" +
                        e.what_without_backtrace() + ")");
    }
  };

  std::vector<GraphCost> costs(3);
  if (unverified) unverified->assign(3, {});
  MetaMemo memo;  // shared by the graphs: the forward repeats the inference graph's layers
  std::vector<c10::IValue> forward_outputs;
  const std::optional<CompiledGraph>* graphs[3] = {&state.inference, &state.forward,
                                                   &state.backward};
  for (size_t gi = 0; gi < 3; ++gi) {
    if (!graphs[gi]->has_value()) continue;
    const CompiledGraph& g = **graphs[gi];
    std::vector<c10::IValue> inputs;
    for (size_t i = 0; i < g.bindings.inputs.size(); ++i) {
      const InputBinding& b = g.bindings.inputs[i];
      switch (b.source) {
        case InputSource::Weight: inputs.emplace_back(weights[b.index]); break;
        case InputSource::UserInput: inputs.push_back(user_input(g, i)); break;
        case InputSource::Saved:
        case InputSource::Tangent: {
          // The forward graph's meta results: Saved(k) and user output k.
          const CompiledGraph& fw = *state.forward;
          c10::IValue found;
          for (size_t j = 0; j < fw.bindings.outputs.size(); ++j) {
            const OutputBinding& ob = fw.bindings.outputs[j];
            const bool match = b.source == InputSource::Saved
                                   ? ob.sink == OutputSink::Saved && ob.index == b.index
                                   : ob.sink == OutputSink::UserOutput && ob.index == b.index;
            if (match) found = forward_outputs[j];
          }
          if (b.source == InputSource::Tangent && found.isTensor()) {
            found = at::empty_like(found.toTensor(), at::MemoryFormat::Contiguous);
          }
          inputs.push_back(found);
          break;
        }
      }
    }
    MetaRun run(state, g, ops, symbols, memo);
    std::vector<std::pair<uint32_t, uint64_t>> unchecked;
    std::vector<c10::IValue> outputs;
    {
      // Meta kernels allocate no data; a composite op that made real CPU tensors for meta
      // inputs would still be bounded.
      AllocationCap cap(uint64_t{64} << 20);
      costs[gi] = run.run(std::move(inputs), &unchecked, &outputs);
    }
    if (unverified) (*unverified)[gi] = std::move(unchecked);
    if (early) {
      const std::string over = bound_excess(costs, *early);
      if (!over.empty()) throw FormatError("program.fb: " + over);
    }
    if (gi == 1) forward_outputs = std::move(outputs);
  }
  return costs;
}

}  // namespace

std::string bound_excess(const std::vector<GraphCost>& costs, const RunLimits& limits,
                         size_t first, size_t last, const char* runs) {
  uint64_t total_work = 0;
  for (size_t gi = first; gi < costs.size() && gi < last && gi < 3; ++gi) {
    if (costs[gi].peak_bytes > limits.max_bytes) {
      return "graph '" + std::string(kRoles[gi]) + "' needs " + figure(costs[gi].peak_bytes) +
             " bytes of tensors at its peak, more than the bound of " + figure(limits.max_bytes) +
             " (LoadOptions::run.max_bytes, export-cli --max-run-bytes; by default max(32 MiB, "
             "16 x archive size); export-cli --trusted: no bounds)";
    }
    total_work = sat_add(total_work, costs[gi].work);
    if (total_work > limits.max_work) {
      return std::string(runs) + " " + figure(total_work) +
             " element operations per run, more than the bound of " + figure(limits.max_work) +
             " (LoadOptions::run.max_work, export-cli --max-run-work; by default max(5e8, 500 x "
             "S x max(1, S/1MiB)) for an archive of S bytes; export-cli --trusted: no bounds)";
    }
  }
  return std::string();
}

std::vector<GraphCost> costs_on_meta(const ModelState& state, const std::vector<ResolvedOp>& ops,
                                     const std::vector<int64_t>& symbols) {
  return run_graphs(state, ops, symbols, nullptr, nullptr);
}

std::vector<GraphCost> check_on_meta(ModelState& state, const std::vector<ResolvedOp>& ops,
                                     const RunLimits& limits) {
  install_allocation_cap();
  // Dynamic shapes: the run at every symbol's range maximum verifies the declared shapes and
  // bounds every call (sizes in an archive grow with each symbol: sums, positive products,
  // floor/ceil divisions; runtime/README). A program over the bounds there is refused only if
  // it is over them at the range minima too; else each call is bounded at its own sizes.
  bool bounded = true;
  const std::vector<int64_t> maxima = symbol_maxima(*state.program, &bounded);
  const std::vector<int64_t> minima = bounded ? symbol_minima(*state.program) : maxima;
  const bool ranged = minima != maxima;
  std::vector<std::vector<std::pair<uint32_t, uint64_t>>> unverified;
  std::vector<GraphCost> costs =
      run_graphs(state, ops, maxima, ranged ? nullptr : &limits, &unverified);
  const std::optional<CompiledGraph>* graphs[3] = {&state.inference, &state.forward,
                                                   &state.backward};
  for (size_t gi = 0; gi < 3; ++gi) {
    if (graphs[gi]->has_value()) (*graphs[gi])->plan->check_results_of(unverified[gi]);
  }
  const std::string over = bound_excess(costs, limits);
  if (over.empty()) return costs;
  const std::string at_min = bound_excess(costs_on_meta(state, ops, minima), limits);
  if (!at_min.empty()) {
    throw FormatError("program.fb: even at the smallest sizes (" +
                      symbols_text(*state.program, minima) + "): " + at_min);
  }
  state.call_bounds = std::make_shared<const CallBounds>(limits, ops, maxima);
  return costs;
}

}  // namespace pt2rt
