// pt2rt/queries.h — AOTAutograd's FX-utility queries over a loaded Program.
//
// C++ counterparts of torch._functorch._aot_autograd.fx_utils
// (PyTorch docs, "aot_export_joint_with_descriptors"). AOTAutograd answers them on one joint FX
// graph; a pt2rt archive stores the joint partitioned into a forward and a backward graph,
// so an "input node" is a forward-graph input (the inference graph's when the archive has
// no forward graph), a "grad node" the backward-graph output whose descriptor is
// Grad(of=<that input's descriptor>), an "output node" a forward-graph output and a
// "tangent node" the backward-graph input whose descriptor is Tangent(output=<it>).
//
// Results come in graph order (like the insertion order of the Python dicts). Everything
// returned is a copy: it does not refer into the Program.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt {

/// One graph input or output — the analogue of an FX placeholder / output-node entry.
struct GraphNode {
  GraphRole graph = GraphRole::Forward;  ///< the graph it belongs to
  size_t position = 0;                   ///< index into Graph::inputs or Graph::outputs
  int64_t value = -1;                    ///< value id; -1 for a None output
  std::string name;                      ///< the value's name ("" for None)
};

struct InputAndGrad {
  InputDescriptor descriptor;  ///< ParamAOTInput / PlainAOTInput
  GraphNode input;
  std::optional<GraphNode> grad;  ///< absent: no Grad output (frozen / not requiring grad)
};

struct OutputAndTangent {
  OutputDescriptor descriptor;  ///< PlainAOTOutput / InputMutationAOTOutput
  GraphNode output;
  std::optional<GraphNode> tangent;  ///< absent: non-differentiable or no tangent input
};

/// Every Param(fqn) input with its Grad output (get_param_and_grad_nodes).
/// @throws Error when the program has neither a forward nor an inference graph.
std::vector<InputAndGrad> get_param_and_grad_nodes(const Program& program);

/// Every Buffer(fqn) input by FQN (get_named_buffer_nodes).
std::vector<std::pair<std::string, GraphNode>> get_named_buffer_nodes(const Program& program);

/// Every Plain(i) user input with its Grad output (get_plain_input_and_grad_nodes).
std::vector<InputAndGrad> get_plain_input_and_grad_nodes(const Program& program);

/// Every forward output that is not a Saved activation — user outputs (Plain) and mutated
/// inputs (InputMutation) — with its Tangent input (get_all_output_and_tangent_nodes).
/// @throws Error when a subclass descriptor is present (no 1:1 output/tangent pairing).
std::vector<OutputAndTangent> get_all_output_and_tangent_nodes(const Program& program);

}  // namespace pt2rt
