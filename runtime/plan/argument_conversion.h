// runtime/plan/argument_conversion.h — archive Arguments → pre-built call
// arguments, once at load.
//
// A node's arguments are matched against the RUNTIME op schema (c10::FunctionSchema):
// positional archive arguments take schema positions in order, kwarg_only ones are matched
// by name, and schema arguments the archive omits take the schema's default_value() (how an
// archive from an older torch runs on a newer one). Each argument's kind is checked against
// the schema type (Tensor vs int vs float ...). Constants become ready IValues; tensor and
// SymInt references become value-slot indices read per call.
//
// Device arguments recorded at export (`device=cpu`) are retargeted to the model's device;
// factory ops with `device=None` (no tensor argument to follow) get the model's device too
// when that is not the CPU.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "pt2rt/errors.h"
#include "pt2rt/program.h"

namespace pt2rt {

/// One schema argument of an instruction, ready to be pushed on the call stack.
struct PlannedArg {
  enum class Kind : uint8_t {
    Constant,            ///< `constant` as is
    Slot,                ///< the value in slot `slot` (Tensor, TensorList, SymInt, ...)
    TensorList,          ///< Tensor[] built from slots `elements`
    OptionalTensorList,  ///< Tensor?[] from `elements` (slot id, or -1 for None)
    IntList              ///< int[]/SymInt[]: elements[i] is a constant or, if element_is_slot[i], a slot
  };
  Kind kind = Kind::Constant;
  c10::IValue constant;
  ValueId slot = 0;
  std::vector<int64_t> elements;
  std::vector<bool> element_is_slot;
};

/// Where a node sits, for conversion and for error messages.
struct NodeContext {
  const Program& program;
  const Graph& graph;
  size_t node_index;
  const Operator& op;
  c10::Device device;  ///< the model's device (retarget target)
  const Node& node() const { return graph.nodes[node_index]; }
  /// "graph forward, node 12 'addmm_1' (aten::addmm)"
  std::string describe() const;
};

/// An archive argument that does not fit the runtime schema: unknown to it, missing without a
/// default, or of a kind its type does not take. A FormatError (the archive disagrees with the
/// schema it recorded) unless the running schema differs from the recorded one — then the
/// caller reports it as a version difference (op_resolution.h, ResolutionReport).
class SchemaMismatch : public FormatError {
 public:
  SchemaMismatch(const NodeContext& ctx, std::string argument, std::string problem);
  std::string where;     ///< NodeContext::describe()
  std::string argument;  ///< the argument's name; empty for the node's returns
  std::string problem;   ///< e.g. "is not in the running schema aten::foo(...)"
};

/// Plans the node's arguments: one PlannedArg per argument of `schema`, in schema order.
/// @throws SchemaMismatch when an archive argument's kind does not fit the schema type, is
///   unknown to the runtime schema, or is missing without a schema default;
///   FormatError naming the graph, node, op and argument when it refers to a value of the
///   wrong kind or out of range, or is given twice.
std::vector<PlannedArg> plan_arguments(const NodeContext& ctx, const c10::FunctionSchema& schema);

/// Appends every slot `arg` reads to `out` (for liveness analysis).
void collect_slots(const PlannedArg& arg, std::vector<ValueId>& out);

/// Device recorded in a graph → device to run on: cpu/cuda become `model`, others (meta) stay.
c10::Device retarget_device(c10::Device recorded, c10::Device model);

}  // namespace pt2rt
