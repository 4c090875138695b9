// cli/graph_json.cpp — one graph as structured nodes for `export-cli inspect --graph --json`.
#include "graph_json.h"

#include <cmath>
#include <sstream>

#include "graph_facts.h"
#include "program_json.h"
#include "tensor_io.h"

namespace pt2rt::cli {
namespace {

using nlohmann::ordered_json;

template <typename T>
std::string streamed(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

/// A float constant; JSON has no NaN or infinity, so those are the strings Python prints.
ordered_json float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

/// The fields an argument adds to its {"arg": name} object.
struct ArgumentFields {
  const Graph& graph;
  ordered_json& j;

  ordered_json name(int64_t id) const { return value_name(graph, id); }
  void operator()(const NoneArg&) const { j["constant"] = nullptr; }
  void operator()(const TensorRef& r) const { j["value"] = name(r.value); }
  void operator()(const TensorListRef& r) const { j["value"] = name(r.value); }
  void operator()(const SymIntRef& r) const { j["value"] = name(r.value); }
  void operator()(const SymFloatRef& r) const { j["value"] = name(r.value); }
  void operator()(const SymBoolRef& r) const { j["value"] = name(r.value); }
  void operator()(const TensorListArg& l) const {
    ordered_json names = ordered_json::array();
    for (ValueId id : l.values) names.push_back(name(id));
    j["values"] = names;
  }
  void operator()(const OptionalTensorListArg& l) const {
    ordered_json names = ordered_json::array();
    for (int64_t id : l.values) names.push_back(id < 0 ? ordered_json(nullptr) : name(id));
    j["values"] = names;
  }
  void operator()(const SymIntListArg& l) const {
    bool any_ref = false;
    ordered_json items = ordered_json::array();
    for (size_t i = 0; i < l.values.size(); ++i) {
      const bool is_ref = i < l.is_ref.size() && l.is_ref[i];
      any_ref = any_ref || is_ref;
      items.push_back(is_ref ? name(l.values[i]) : ordered_json(l.values[i]));
    }
    j[any_ref ? "values" : "constant"] = items;
  }
  void operator()(int64_t v) const { j["constant"] = v; }
  void operator()(const IntListArg& l) const { j["constant"] = l.values; }
  void operator()(double v) const { j["constant"] = float_json(v); }
  void operator()(const FloatListArg& l) const {
    ordered_json items = ordered_json::array();
    for (double v : l.values) items.push_back(float_json(v));
    j["constant"] = items;
  }
  void operator()(bool v) const { j["constant"] = v; }
  void operator()(const BoolListArg& l) const {
    ordered_json items = ordered_json::array();
    for (bool v : l.values) items.push_back(v);
    j["constant"] = items;
  }
  void operator()(const std::string& s) const { j["constant"] = s; }
  void operator()(const c10::Scalar& s) const {
    if (s.isBoolean()) {
      j["constant"] = s.toBool();
    } else if (s.isIntegral(false)) {
      j["constant"] = s.toLong();
    } else if (s.isComplex()) {
      const auto c = s.toComplexDouble();
      j["constant"] = {{"real", float_json(c.real())}, {"imag", float_json(c.imag())}};
    } else {
      j["constant"] = float_json(s.toDouble());
    }
  }
  void operator()(c10::ScalarType t) const { j["constant"] = "torch." + dtype_name(t); }
  void operator()(c10::Layout l) const { j["constant"] = streamed(l); }
  void operator()(c10::MemoryFormat m) const { j["constant"] = streamed(m); }
  void operator()(const c10::Device& d) const { j["constant"] = d.str(); }
};

ordered_json node_json(const Program& program, const Graph& graph, const Node& node) {
  ordered_json inputs = ordered_json::array();
  for (const auto& a : node.args) {
    ordered_json arg = {{"arg", a.name}};
    std::visit(ArgumentFields{graph, arg}, a.value);
    if (a.kwarg_only) arg["kwarg_only"] = true;
    inputs.push_back(std::move(arg));
  }
  ordered_json outputs = ordered_json::array();
  for (ValueId id : node.outputs) outputs.push_back(value_json(program, graph, id));
  std::string name = node.debug.fx_name;
  if (name.empty() && !node.outputs.empty()) name = value_name(graph, node.outputs[0]);
  ordered_json j = {{"name", name}, {"op", op_name(program, node)}};
  if (!node.debug.module_fqn.empty()) j["module"] = node.debug.module_fqn;
  j["inputs"] = std::move(inputs);
  j["outputs"] = std::move(outputs);
  return j;
}

}  // namespace

ordered_json graph_json(const Program& program, const Graph& graph) {
  ordered_json nodes = ordered_json::array();
  for (const auto& node : graph.nodes) nodes.push_back(node_json(program, graph, node));
  return {{"role", to_string(graph.role)},
          {"num_nodes", graph.nodes.size()},
          {"op_histogram", op_histogram_json(program, graph)},
          {"inputs", graph_inputs_json(program, graph)},
          {"outputs", graph_outputs_json(program, graph)},
          {"nodes", nodes}};
}

}  // namespace pt2rt::cli
