// cli/graph_facts.h — what `export-cli inspect` says about one graph, in text and JSON alike:
// value names and types, each node's op overload, the op histogram, and the inputs and
// outputs counted by descriptor kind. Every id comes from the archive and is range-checked
// here, so a rendering never indexes out of bounds.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt::cli {

/// The name of value `id` of `graph` (the FX node name; user inputs: the forward() argument
/// name), "<bad value id>" when out of range.
const std::string& value_name(const Graph& graph, int64_t id);

/// How value_type spells a value that is not a tensor (a tensor is meta_string's
/// "float32[batch, 10]" in every spelling, "Tensor" when it has no metadata).
enum class TypeSpelling {
  Schema,      ///< as an op schema writes it: "SymInt", "None", "Tensor[]", "Tensor?[]" (inspect)
  Kind,        ///< to_string(ValueKind): "SymInt", "None", "TensorList", ... (profile)
  Expression,  ///< a SymInt/SymFloat/SymBool's expression, "(2 * batch)"; else "" (DOT)
};

/// The one spelling of a graph value's type, built on meta_string and to_string(ValueKind).
std::string value_type(const Program& program, const Value& value, TypeSpelling spelling);

/// Value `id`'s type, TypeSpelling::Schema: "float32[batch, 10]", "SymInt", "Tensor[]",
/// "None" (also for id -1, a None output, or any id out of range).
std::string value_type(const Program& program, const Graph& graph, int64_t id);

/// The op overload of `node`, as torch.export names it: "aten::addmm", "aten::add.Tensor".
std::string op_name(const Program& program, const Node& node);

/// Op overload -> number of nodes calling it, sorted by overload.
std::vector<std::pair<std::string, int>> op_histogram(const Program& program, const Graph& graph);

/// Descriptor kind -> count, in order of first appearance: for the inputs
/// ("Plain", "Param", "Buffer", ...) and the outputs ("Plain", "InputMutation", "Saved", ...).
std::vector<std::pair<std::string, int>> input_kinds(const Graph& graph);
std::vector<std::pair<std::string, int>> output_kinds(const Graph& graph);

}  // namespace pt2rt::cli
