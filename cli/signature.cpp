// cli/signature.cpp — user inputs/outputs by descriptor, weight counts.
#include "signature.h"

#include <algorithm>

namespace pt2rt::cli {
namespace {

UserValue user_value(const Graph& graph, int64_t index, int64_t value_id) {
  UserValue v;
  v.index = index;
  if (value_id >= 0 && static_cast<size_t>(value_id) < graph.values.size()) {
    const Value& value = graph.values[static_cast<size_t>(value_id)];
    v.name = value.name;
    if (value.kind == ValueKind::Tensor && value.meta) v.meta = &*value.meta;
  }
  return v;
}

}  // namespace

std::vector<UserValue> user_inputs(const Graph& graph) {
  std::vector<UserValue> out;
  for (const auto& in : graph.inputs) {
    if (in.descriptor.kind == InputKind::Plain) {
      out.push_back(user_value(graph, in.descriptor.idx, static_cast<int64_t>(in.value)));
    }
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.index < b.index; });
  return out;
}

std::vector<UserValue> user_outputs(const Program& program, const Graph& graph) {
  std::vector<UserValue> out;
  for (const auto& o : graph.outputs) {
    if (o.descriptor.kind == OutputKind::Plain) {
      out.push_back(user_value(graph, o.descriptor.idx, o.value));
    }
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.index < b.index; });
  // Every graph has the same user outputs in the same order (forward and inference): the
  // names are the signature's, whichever graph this is.
  const Signature sig = program_signature(program);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].output_name = i < sig.outputs.size() ? sig.outputs[i].name : positional_output_name(i);
  }
  return out;
}

WeightCounts count_weights(const Program& program) {
  WeightCounts c;
  for (const auto& w : program.weights) {
    int64_t numel = 1;
    for (int64_t s : w.sizes) numel *= s;
    c.bytes += w.byte_length;
    switch (w.kind) {
      case WeightKind::Parameter:
        ++c.parameters;
        c.parameter_elements += numel;
        if (w.requires_grad) {
          ++c.trainable;
          c.trainable_elements += numel;
        }
        break;
      case WeightKind::Buffer:
        ++c.buffers;
        break;
      case WeightKind::Constant:
        ++c.constants;
        break;
    }
  }
  return c;
}

std::optional<int64_t> static_batch_size(const Program& program) {
  const Graph* graph = program.graph(GraphRole::Forward);
  if (graph == nullptr) graph = signature_graph(program);
  if (graph == nullptr) return std::nullopt;
  auto inputs = user_inputs(*graph);
  if (inputs.empty() || inputs[0].meta == nullptr || inputs[0].meta->sizes.empty()) {
    return std::nullopt;
  }
  const Dim& d = inputs[0].meta->sizes[0];
  if (!d.is_static()) return std::nullopt;
  return d.value;
}

}  // namespace pt2rt::cli
