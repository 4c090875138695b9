// runtime/model/queries.cpp — see pt2rt/queries.h.
#include "pt2rt/queries.h"

#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

const Graph& primal_graph(const Program& program) {
  if (const Graph* g = program.graph(GraphRole::Forward)) return *g;
  if (const Graph* g = program.graph(GraphRole::Inference)) return *g;
  throw Error("pt2rt: the program has neither a forward nor an inference graph");
}

GraphNode input_node(const Graph& g, size_t i) {
  const GraphInput& in = g.inputs[i];
  return GraphNode{g.role, i, static_cast<int64_t>(in.value),
                   in.value < g.values.size() ? g.values[in.value].name : std::string()};
}

GraphNode output_node(const Graph& g, size_t j) {
  const GraphOutput& out = g.outputs[j];
  bool valid = out.value >= 0 && static_cast<size_t>(out.value) < g.values.size();
  return GraphNode{g.role, j, out.value, valid ? g.values[out.value].name : std::string()};
}

bool is_subclass(InputKind k) {
  return k == InputKind::SubclassGetAttr || k == InputKind::SubclassSize ||
         k == InputKind::SubclassStride;
}
bool is_subclass(OutputKind k) {
  return k == OutputKind::SubclassGetAttr || k == OutputKind::SubclassSize ||
         k == OutputKind::SubclassStride;
}

/// The backward output Grad(of=d), if any.
std::optional<GraphNode> grad_of(const Program& program, const InputDescriptor& d) {
  const Graph* bw = program.graph(GraphRole::Backward);
  if (!bw) return std::nullopt;
  for (size_t j = 0; j < bw->outputs.size(); ++j) {
    const OutputDescriptor& od = bw->outputs[j].descriptor;
    if (od.kind == OutputKind::Grad && od.of && *od.of == d) return output_node(*bw, j);
  }
  return std::nullopt;
}

std::vector<InputAndGrad> inputs_of_kind(const Program& program, InputKind kind) {
  const Graph& g = primal_graph(program);
  std::vector<InputAndGrad> result;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const InputDescriptor& d = g.inputs[i].descriptor;
    if (d.kind != kind) continue;
    result.push_back(InputAndGrad{d, input_node(g, i), grad_of(program, d)});
  }
  return result;
}

}  // namespace

std::vector<InputAndGrad> get_param_and_grad_nodes(const Program& program) {
  return inputs_of_kind(program, InputKind::Param);
}

std::vector<InputAndGrad> get_plain_input_and_grad_nodes(const Program& program) {
  return inputs_of_kind(program, InputKind::Plain);
}

std::vector<std::pair<std::string, GraphNode>> get_named_buffer_nodes(const Program& program) {
  const Graph& g = primal_graph(program);
  std::vector<std::pair<std::string, GraphNode>> result;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const InputDescriptor& d = g.inputs[i].descriptor;
    if (is_subclass(d.kind) && d.base && d.base->kind == InputKind::Buffer) {
      throw Error("pt2rt: get_named_buffer_nodes: buffer '" + d.base->fqn +
                  "' is a tensor subclass; its FQN does not map to one plain tensor");
    }
    if (d.kind == InputKind::Buffer) result.emplace_back(d.fqn, input_node(g, i));
  }
  return result;
}

std::vector<OutputAndTangent> get_all_output_and_tangent_nodes(const Program& program) {
  const Graph& g = primal_graph(program);
  const Graph* bw = program.graph(GraphRole::Backward);
  std::vector<OutputAndTangent> result;
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    const OutputDescriptor& d = g.outputs[j].descriptor;
    if (is_subclass(d.kind)) {
      throw Error("pt2rt: get_all_output_and_tangent_nodes: output " + d.to_string() +
                  " is a tensor-subclass piece; outputs and tangents do not pair 1:1");
    }
    if (d.kind != OutputKind::Plain && d.kind != OutputKind::InputMutation) continue;
    OutputAndTangent entry{d, output_node(g, j), std::nullopt};
    if (bw) {
      for (size_t i = 0; i < bw->inputs.size(); ++i) {
        const InputDescriptor& td = bw->inputs[i].descriptor;
        if (td.kind == InputKind::Tangent && td.output && *td.output == d) {
          entry.tangent = input_node(*bw, i);
          break;
        }
      }
    }
    result.push_back(std::move(entry));
  }
  return result;
}

}  // namespace pt2rt
