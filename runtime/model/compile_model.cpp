// runtime/model/compile_model.cpp — see compile_model.h.
#include "model/compile_model.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "core/sym_eval.h"
#include "core/tensor_format.h"
#include "model/meta_check.h"
#include "plan/op_resolution.h"
#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

void check_weights(const Program& program, const std::vector<at::Tensor>& weights,
                   c10::Device device) {
  if (weights.size() != program.weights.size()) {
    throw FormatError("program.fb lists " + std::to_string(program.weights.size()) +
                      " weights, got " + std::to_string(weights.size()) + " tensors");
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    const WeightInfo& w = program.weights[i];
    const at::Tensor& t = weights[i];
    if (!t.defined() || t.scalar_type() != w.dtype || t.sizes() != c10::IntArrayRef(w.sizes) ||
        t.device().type() != device.type()) {
      throw FormatError(
          "weight '" + w.fqn + "' (" + w.entry + "): expected " +
          describe_tensor_type(w.dtype, w.sizes) + " on " + device.str() + ", got " +
          (t.defined() ? describe_tensor_type(t.scalar_type(), t.sizes()) + " on " +
                             t.device().str()
                       : std::string("an undefined tensor")));
    }
  }
}

/// `options`: the plan's (PlanOptions); with `cache_weight_work` its cacheable_inputs are set
/// from the bindings: what reads only weights is hoisted out of the per-call path (the
/// inference graph).
CompiledGraph compile_graph(const std::shared_ptr<const Program>& program, const Graph& graph,
                            const std::vector<ResolvedOp>& ops, const WeightIndex& weights,
                            c10::Device device, ResolutionReport& report,
                            PlanOptions options = {}, bool cache_weight_work = false) {
  CompiledGraph g;
  g.bindings = bind_graph(*program, graph, weights);
  if (cache_weight_work) {
    for (const InputBinding& b : g.bindings.inputs) {
      options.cacheable_inputs.push_back(b.source == InputSource::Weight);
    }
  }
  g.plan = ExecutionPlan::build(program, graph, ops, device, options, &report);
  return g;
}

[[noreturn]] void pairing_error(const std::string& what) {
  throw FormatError("program.fb: forward and backward graphs do not pair: " + what);
}

void check_pairing(const ModelState& s) {
  const CompiledGraph& fw = *s.forward;
  if (s.inference) {
    const auto& inf = s.inference->bindings;
    if (inf.user_input_positions.size() != fw.bindings.user_input_positions.size() ||
        inf.user_output_values.size() != fw.bindings.user_output_values.size()) {
      throw FormatError(
          "program.fb: the inference graph takes " +
          std::to_string(inf.user_input_positions.size()) + " inputs and returns " +
          std::to_string(inf.user_output_values.size()) + " outputs, the forward graph " +
          std::to_string(fw.bindings.user_input_positions.size()) + " and " +
          std::to_string(fw.bindings.user_output_values.size()));
    }
  }
  if (!s.backward) return;
  const GraphBindings& bw = s.backward->bindings;
  if (bw.num_saved > fw.bindings.num_saved) {
    pairing_error("backward reads " + std::to_string(bw.num_saved) +
                  " saved values, forward saves " + std::to_string(fw.bindings.num_saved));
  }
  for (const InputBinding& in : bw.inputs) {
    if (in.source == InputSource::Tangent &&
        (in.index >= s.output_differentiable.size() || !s.output_differentiable[in.index])) {
      pairing_error("backward takes a tangent of output " + std::to_string(in.index) +
                    ", which is not a differentiable forward output");
    }
  }
  for (const OutputBinding& out : bw.outputs) {
    if (out.sink == OutputSink::UserInputGrad &&
        out.index >= fw.bindings.user_input_positions.size()) {
      pairing_error("backward returns the gradient of input " + std::to_string(out.index) +
                    " of " + std::to_string(fw.bindings.user_input_positions.size()));
    }
    if (out.sink == OutputSink::WeightGrad && s.weight_parameter[out.index] < 0) {
      pairing_error("backward returns a gradient for non-parameter weight '" +
                    s.program->weights[out.index].fqn + "'");
    }
  }
}

/// Why LoadOptions::cuda_graphs cannot capture calls of graph `g`, or "": a captured call
/// works on static copies of the user inputs (a write into one would not reach the caller's
/// tensor), and returns tensors only (a saved SymInt would be lost).
std::string graphs_refusal(const CompiledGraph& g) {
  for (const OutputBinding& b : g.bindings.outputs) {
    if (b.sink == OutputSink::MutatedUserInput) {
      return "the graph writes into user input " + std::to_string(b.index);
    }
    if (b.sink == OutputSink::Saved && b.value >= 0 &&
        g.graph().values[b.value].kind != ValueKind::Tensor) {
      return "the forward saves a non-tensor value for the backward (Saved(" +
             std::to_string(b.index) + "))";
    }
  }
  return "";
}

/// Every Tangent input of the backward graph declares a tensor shape: bind_inputs makes zeros of
/// it when no gradient arrives for that output.
void check_tangents(const CompiledGraph& bw) {
  const Graph& g = bw.graph();
  for (size_t i = 0; i < bw.bindings.inputs.size(); ++i) {
    if (bw.bindings.inputs[i].source != InputSource::Tangent) continue;
    const Value& v = g.values[g.inputs[i].value];
    if (v.kind != ValueKind::Tensor || !v.meta) {
      throw FormatError("program.fb: graph 'backward': input " + std::to_string(i) + " " +
                        g.inputs[i].descriptor.to_string() +
                        " declares no tensor shape (needed for a zero cotangent)");
    }
  }
}

}  // namespace

std::shared_ptr<ModelState> compile_model(std::shared_ptr<const Program> program,
                                          std::vector<at::Tensor> weights, c10::Device device,
                                          const LoadOptions& options, uint64_t archive_bytes) {
  if (options.onednn_benchmark && !options.inference_only) {
    throw InputError("LoadOptions::onednn_benchmark needs LoadOptions::inference_only (only a load "
                     "that never trains runs convolutions on packed oneDNN weights)");
  }
  check_weights(*program, weights, device);
  // Dynamic shapes: the meta check runs at every symbol's range maximum, which bounds every
  // call; a symbol without an upper bound has no such worst case, so its archive needs
  // LoadOptions::allow_symbolic_shapes (then checked at the hints).
  bool bounded = true;
  symbol_maxima(*program, &bounded);
  if (!bounded && !options.allow_symbolic_shapes) {
    throw FormatError("program.fb: a symbolic size (dynamic shape) has no upper bound in the "
                      "range constraints, so pt2rt cannot bound a run at load; export it with a "
                      "max (pt2rt.Dim(name, min=..., max=...)), or load a trusted archive with "
                      "LoadOptions::allow_symbolic_shapes (export-cli --trusted)");
  }
  auto state = std::make_shared<ModelState>();
  state->program = program;
  state->device = device;
  state->signature = program_signature(*program);
  state->options = options;
  state->archive_bytes = archive_bytes;
  state->weights = std::move(weights);
  state->weight_parameter.assign(program->weights.size(), -1);
  for (size_t i = 0; i < program->weights.size(); ++i) {
    switch (program->weights[i].kind) {
      case WeightKind::Parameter:
        state->weight_parameter[i] = static_cast<int64_t>(state->parameter_weights.size());
        state->parameter_weights.push_back(i);
        break;
      case WeightKind::Buffer: state->buffer_weights.push_back(i); break;
      case WeightKind::Constant: break;
    }
  }

  // Everything the running LibTorch lacks (operators, overloads, arguments, in every graph) is
  // collected first and thrown as one OpResolutionError.
  ResolutionReport report;
  const std::vector<ResolvedOp> ops = resolve_operators(*program, options.allow_operators, &report);
  const WeightIndex index = index_weights(*program);
  if (const Graph* g = program->graph(GraphRole::Inference)) {
    // A load that never trains caches computed weight-only values and packs oneDNN weights;
    // with onednn_benchmark it times ATen against oneDNN within the archive's run bounds: at
    // most twice the work and the peak bytes a run of it may take (onednn_benchmark.h).
    PlanOptions plan;
    plan.inference_only = options.inference_only;
    if (options.onednn_benchmark) {
      const RunLimits bounds = options.run.resolved(archive_bytes);
      plan.onednn_choice = OneDnnChoice::Benchmark;
      const uint64_t macs = bounds.max_work > UINT64_MAX / 2 ? UINT64_MAX : 2 * bounds.max_work;
      plan.onednn_budget.macs = static_cast<int64_t>(
          std::min<uint64_t>(macs, static_cast<uint64_t>(plan.onednn_budget.macs)));
      plan.onednn_budget.case_bytes = std::min(bounds.max_bytes, plan.onednn_budget.case_bytes);
    }
    state->inference = compile_graph(program, *g, ops, index, device, report, plan,
                                     /*cache_weight_work=*/true);
  }
  std::shared_ptr<GraphCapturer> capturer;
  if (options.cuda_graphs && device.is_cuda()) capturer = make_graph_capturer(device);
  if (capturer && state->inference) {
    state->inference_graphs_refused = graphs_refusal(*state->inference);
    if (state->inference_graphs_refused.empty()) {
      state->inference_graphs =
          std::make_shared<InferenceGraphs>(capturer, options.max_cuda_graphs);
    }
  }
  if (options.inference_only && !program->graph(GraphRole::Inference)) {
    throw InputError("LoadOptions::inference_only, but the archive has no inference "
                     "graph (exported with inference=False)");
  }
  const Graph* forward = options.inference_only ? nullptr : program->graph(GraphRole::Forward);
  const Graph* backward = options.inference_only ? nullptr : program->graph(GraphRole::Backward);
  if (const Graph* g = forward) {
    state->forward = compile_graph(program, *g, ops, index, device, report);
    for (int64_t v : state->forward->bindings.user_output_values) {
      const Value* value = v >= 0 ? &g->values[v] : nullptr;
      bool diff = value && value->kind == ValueKind::Tensor && value->meta &&
                  (c10::isFloatingType(value->meta->dtype) || c10::isComplexType(value->meta->dtype));
      state->output_differentiable.push_back(diff);
    }
  }
  if (const Graph* g = backward) {
    if (!state->forward) throw FormatError("program.fb: a backward graph without a forward graph");
    state->backward = compile_graph(program, *g, ops, index, device, report);
  }
  if (capturer && state->forward && state->backward) {
    state->training_graphs_refused = graphs_refusal(*state->forward);
    if (state->training_graphs_refused.empty()) {
      state->training_graphs = std::make_shared<TrainingGraphs>(capturer, options.max_cuda_graphs);
    }
  }
  state->inference_only = options.inference_only;
  report.throw_if_any(*program);
  if (!state->inference && !state->forward) {
    throw FormatError("program.fb: no inference and no forward graph");
  }
  if (state->forward) check_pairing(*state);
  if (state->backward) check_tangents(*state->backward);
  check_on_meta(*state, ops, options.run.resolved(archive_bytes));
  state->continuation = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(device));
  return state;
}

}  // namespace pt2rt
