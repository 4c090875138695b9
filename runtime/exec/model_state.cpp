// runtime/exec/model_state.cpp — see model_state.h.
#include "exec/model_state.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "pt2rt/errors.h"

namespace pt2rt {

std::vector<c10::IValue> bind_inputs(const ModelState& state, const CompiledGraph& g,
                                     const at::TensorList* parameters,
                                     const std::vector<at::Tensor>& user_inputs,
                                     const std::vector<c10::IValue>* saved,
                                     const std::vector<at::Tensor>* tangents) {
  std::vector<c10::IValue> in;
  in.reserve(g.bindings.inputs.size());
  const Graph& graph = g.graph();
  for (size_t i = 0; i < g.bindings.inputs.size(); ++i) {
    const InputBinding& b = g.bindings.inputs[i];
    switch (b.source) {
      case InputSource::Weight: {
        int64_t p = state.weight_parameter[b.index];
        in.emplace_back(parameters && p >= 0 ? (*parameters)[p] : state.weights[b.index]);
        break;
      }
      case InputSource::UserInput: in.emplace_back(user_inputs[b.index]); break;
      case InputSource::Saved: in.push_back((*saved)[b.index]); break;
      case InputSource::Tangent: {
        const at::Tensor& t = (*tangents)[b.index];
        if (t.defined()) {
          in.emplace_back(t);
        } else {
          // An output whose gradient never arrived: its cotangent is zero.
          const TensorMeta& m = *graph.values[graph.inputs[i].value].meta;
          std::vector<int64_t> sizes;
          for (const Dim& d : m.sizes) sizes.push_back(d.value);
          in.emplace_back(at::zeros(sizes, at::TensorOptions().dtype(m.dtype).device(state.device)));
        }
        break;
      }
    }
  }
  return in;
}

void apply_mutations(const ModelState& state, const CompiledGraph& g,
                     const std::vector<c10::IValue>& outputs,
                     const std::vector<at::Tensor>& user_inputs) {
  c10::AutoGradMode no_grad(false);
  for (size_t j = 0; j < g.bindings.outputs.size(); ++j) {
    const OutputBinding& b = g.bindings.outputs[j];
    if (b.sink == OutputSink::MutatedWeight) {
      at::Tensor dst = state.weights[b.index];
      dst.copy_(outputs[j].toTensor());
    } else if (b.sink == OutputSink::MutatedUserInput) {
      at::Tensor dst = user_inputs[b.index];
      dst.copy_(outputs[j].toTensor());
    }
  }
}

}  // namespace pt2rt
