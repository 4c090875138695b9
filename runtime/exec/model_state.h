// runtime/exec/model_state.h — what a loaded Model holds, shared with in-flight autograd nodes.
//
// The immutable part (program, plans, bindings) never changes after load. `weights` are
// tensor handles whose data optimizers update in place and whose BatchNorm buffers the
// training forward writes. A ModelState is held by std::shared_ptr: the Model owns one
// reference and every autograd node created by a training forward holds another, so
// `loss.backward()` stays valid even after the Model was moved or destroyed.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <vector>

#include "exec/bindings.h"
#include "exec/inference_graphs.h"
#include "exec/training_graphs.h"
#include "exec/training_plans.h"
#include "plan/plan.h"
#include "pt2rt/archive.h"
#include "pt2rt/load_options.h"
#include "pt2rt/program.h"
#include "pt2rt/signature.h"

namespace pt2rt {

class CallBounds;

/// One graph, compiled and bound.
struct CompiledGraph {
  std::unique_ptr<ExecutionPlan> plan;
  GraphBindings bindings;
  const Graph& graph() const { return plan->graph(); }
};

struct ModelState {
  std::shared_ptr<const Program> program;
  c10::Device device = c10::kCPU;
  /// Program::weights order: parameters, buffers, constants. Parameters are leaf tensors.
  std::vector<at::Tensor> weights;
  std::vector<size_t> parameter_weights;  ///< parameter position → weight index
  std::vector<size_t> buffer_weights;     ///< buffer position → weight index
  std::vector<int64_t> weight_parameter;  ///< weight index → parameter position, or -1
  std::optional<CompiledGraph> inference, forward, backward;
  /// Loaded with LoadOptions::inference_only: forward/backward left uncompiled on purpose.
  bool inference_only = false;
  /// Per user output of the forward graph: floating/complex dtype (differentiable).
  std::vector<bool> output_differentiable;
  /// The archive the model came from (for save()); null for Model::from_program.
  std::shared_ptr<const Archive> archive;
  /// The bounds it was read with; save() copies it within the same bounds.
  ArchiveLimits archive_limits;
  /// Training forward/backward plans per set of needed gradients (built on first use).
  TrainingPlans training_plans;
  /// The user inputs/outputs (Model::signature()), from `program`.
  Signature signature;
  /// What compile_model was called with (Model::to compiles the plans again with them).
  LoadOptions options;
  uint64_t archive_bytes = 0;
  /// Dynamic shapes over LoadOptions::run at the range maxima, within them at the minima:
  /// every call is bounded at its own sizes (call_bounds.h). Null otherwise (nothing to check
  /// per call).
  std::shared_ptr<const CallBounds> call_bounds;
  /// LoadOptions::cuda_graphs on a CUDA device: the inference calls' graphs, and the
  /// training calls' (each null where *_graphs_refused says why). Null otherwise.
  std::shared_ptr<InferenceGraphs> inference_graphs;
  std::shared_ptr<TrainingGraphs> training_graphs;
  /// Why calls are not captured (a graph that writes user inputs, a forward that saves
  /// non-tensor values); empty otherwise.
  std::string inference_graphs_refused, training_graphs_refused;
  /// A 0-dim float tensor on `device`: the gradient every backward segment passes to the
  /// next (backward_chain.h). Never written.
  at::Tensor continuation;
};

/// Graph inputs of `g` bound from weights, user inputs and (backward) saved values and
/// tangents. Parameters are taken from `parameters` when given (the autograd Function's own
/// inputs), else from state.weights.
std::vector<c10::IValue> bind_inputs(const ModelState& state, const CompiledGraph& g,
                                     const at::TensorList* parameters,
                                     const std::vector<at::Tensor>& user_inputs,
                                     const std::vector<c10::IValue>* saved,
                                     const std::vector<at::Tensor>* tangents);

/// Copies InputMutation outputs into their buffers / user inputs under no-grad
/// (PyTorch's in-place `Tensor::copy_`).
void apply_mutations(const ModelState& state, const CompiledGraph& g,
                     const std::vector<c10::IValue>& outputs,
                     const std::vector<at::Tensor>& user_inputs);

}  // namespace pt2rt
