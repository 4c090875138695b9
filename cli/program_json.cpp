// cli/program_json.cpp — the JSON summary of an archive for `export-cli inspect --json`.
#include "program_json.h"

#include "graph_facts.h"
#include "signature.h"
#include "tensor_io.h"

namespace pt2rt::cli {
namespace {

using nlohmann::ordered_json;

ordered_json user_values_json(const std::vector<UserValue>& values, const Program& program) {
  ordered_json out = ordered_json::array();
  for (const auto& v : values) {
    ordered_json j = {{"index", v.index}, {"name", v.name}};
    if (!v.output_name.empty()) j["output_name"] = v.output_name;  // outputs only
    if (v.meta) {
      j["dtype"] = dtype_name(v.meta->dtype);
      j["shape"] = shape_json(*v.meta, program);
    }
    out.push_back(j);
  }
  return out;
}

/// The fields of an index-carrying descriptor (Plain, Saved, tokens, ...): "idx", plus "attr"
/// and "base" for the kinds that wrap a base descriptor (has_base).
template <typename Descriptor>
void add_index_fields(ordered_json& j, const Descriptor& d) {
  j["idx"] = d.idx;
  if (!has_base(d.kind)) return;
  if (!d.attr.empty()) j["attr"] = d.attr;
  if (d.base) j["base"] = descriptor_json(*d.base);
}

ordered_json signature_json(const Program& program) {
  const auto counts = count_weights(program);
  ordered_json sig = {{"num_parameters", counts.parameters},
                      {"num_trainable", counts.trainable},
                      {"num_buffers", counts.buffers},
                      {"num_constants", counts.constants},
                      {"parameter_elements", counts.parameter_elements},
                      {"trainable_elements", counts.trainable_elements}};
  if (const Graph* g = signature_graph(program)) {
    sig["inputs"] = user_values_json(user_inputs(*g), program);
    sig["outputs"] = user_values_json(user_outputs(program, *g), program);
  }
  return sig;
}

ordered_json graphs_json(const Program& program) {
  ordered_json graphs = ordered_json::array();
  for (const auto& graph : program.graphs) {
    graphs.push_back({{"role", to_string(graph.role)},
                      {"num_nodes", graph.nodes.size()},
                      {"op_histogram", op_histogram_json(program, graph)},
                      {"inputs", graph_inputs_json(program, graph)},
                      {"outputs", graph_outputs_json(program, graph)}});
  }
  return graphs;
}

ordered_json weights_json(const Program& program) {
  ordered_json weights = ordered_json::array();
  for (const auto& w : program.weights) {
    weights.push_back({{"fqn", w.fqn},
                       {"kind", to_string(w.kind)},
                       {"dtype", dtype_name(w.dtype)},
                       {"shape", w.sizes},
                       {"requires_grad", w.requires_grad},
                       {"persistent", w.persistent},
                       {"entry", w.entry},
                       {"bytes", w.byte_length}});
  }
  return weights;
}

ordered_json range_constraints_json(const Program& program) {
  ordered_json ranges = ordered_json::array();
  for (const auto& rc : program.range_constraints) {
    ranges.push_back(
        {{"symbol", rc.symbol < program.symbols.size() ? program.symbols[rc.symbol].name
                                                       : std::to_string(rc.symbol)},
         {"min", rc.min},
         {"max", rc.max == INT64_MAX ? ordered_json(nullptr) : ordered_json(rc.max)}});
  }
  return ranges;
}

ordered_json examples_json(const Program& program) {
  ordered_json examples = ordered_json::array();
  for (const auto& ex : program.examples) {
    examples.push_back(
        {{"name", ex.name},
         {"num_inputs", ex.inputs.size()},
         {"has_references", ex.references.has_value()},
         {"full_grads", ex.references ? ex.references->grads.size() : 0},
         {"sketched_grads", ex.references ? ex.references->grad_sketches.size() : 0}});
  }
  return examples;
}

/// GraphInput or GraphOutput list: value_json of each plus its "descriptor".
template <typename GraphIO>
ordered_json graph_io_json(const Program& program, const Graph& graph,
                           const std::vector<GraphIO>& ios) {
  ordered_json out = ordered_json::array();
  for (const auto& io : ios) {
    ordered_json j = value_json(program, graph, static_cast<int64_t>(io.value));
    j["descriptor"] = descriptor_json(io.descriptor);
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

ordered_json shape_json(const TensorMeta& meta, const Program& program) {
  ordered_json shape = ordered_json::array();
  for (const auto& d : meta.sizes) {
    if (d.is_static()) {
      shape.push_back(d.value);
    } else {
      shape.push_back(dim_string(d, program));
    }
  }
  return shape;
}

ordered_json value_json(const Program& program, const Graph& graph, int64_t id) {
  if (id < 0 || static_cast<size_t>(id) >= graph.values.size()) {
    return {{"name", id < 0 ? ordered_json(nullptr) : ordered_json(value_name(graph, id))},
            {"kind", "None"},
            {"type", "None"}};
  }
  const Value& v = graph.values[static_cast<size_t>(id)];
  ordered_json j = {
      {"name", v.name}, {"kind", to_string(v.kind)}, {"type", value_type(program, graph, id)}};
  if (v.kind == ValueKind::Tensor && v.meta) {
    j["dtype"] = dtype_name(v.meta->dtype);
    j["shape"] = shape_json(*v.meta, program);
  } else if (v.sym) {
    j["expr"] = sym_expr_string(*v.sym, program);
  }
  return j;
}

ordered_json descriptor_json(const InputDescriptor& d) {
  ordered_json j = {{"kind", to_string(d.kind)}};
  if (d.kind == InputKind::Param || d.kind == InputKind::Buffer || d.kind == InputKind::Constant) {
    j["fqn"] = d.fqn;
  } else if (d.kind == InputKind::Tangent) {
    if (d.output) j["output"] = descriptor_json(*d.output);
  } else {
    add_index_fields(j, d);
  }
  j["repr"] = d.to_string();
  return j;
}

ordered_json descriptor_json(const OutputDescriptor& d) {
  ordered_json j = {{"kind", to_string(d.kind)}};
  if (d.kind == OutputKind::Grad || d.kind == OutputKind::InputMutation) {
    if (d.of) j["of"] = descriptor_json(*d.of);
  } else {
    add_index_fields(j, d);
  }
  j["repr"] = d.to_string();
  return j;
}

ordered_json op_histogram_json(const Program& program, const Graph& graph) {
  ordered_json j = ordered_json::object();
  for (const auto& [op, n] : op_histogram(program, graph)) j[op] = n;
  return j;
}

ordered_json graph_inputs_json(const Program& program, const Graph& graph) {
  return graph_io_json(program, graph, graph.inputs);
}

ordered_json graph_outputs_json(const Program& program, const Graph& graph) {
  ordered_json out = graph_io_json(program, graph, graph.outputs);
  const auto users = user_outputs(program, graph);  // Plain outputs: their stored names
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const OutputDescriptor& d = graph.outputs[i].descriptor;
    for (const auto& u : users) {
      if (d.kind == OutputKind::Plain && u.index == d.idx) out[i]["output_name"] = u.output_name;
    }
  }
  return out;
}

ordered_json summary_json(const ArchiveFacts& facts, const Program& program) {
  ordered_json j;
  j["path"] = facts.path;
  j["archive_format"] = facts.archive_format;
  j["archive_version"] = facts.archive_version;
  j["archive_bytes"] = facts.file_bytes;
  ordered_json size = ordered_json::array();
  for (const auto& part : size_breakdown(facts, program)) {
    size.push_back(
        {{"part", part.name}, {"bytes", part.bytes}, {"within_program", part.within_program}});
  }
  j["size"] = size;
  j["schema_version"] = {{"major", program.schema_major}, {"minor", program.schema_minor}};
  j["producer"] = {{"exporter_version", program.producer.exporter_version},
                   {"torch_version", program.producer.torch_version},
                   {"python_version", program.producer.python_version},
                   {"capture", program.producer.capture}};
  j["signature"] = signature_json(program);
  j["graphs"] = graphs_json(program);
  j["weights"] = weights_json(program);
  j["weights_total_bytes"] = count_weights(program).bytes;
  ordered_json symbols = ordered_json::array();
  for (const auto& s : program.symbols) symbols.push_back({{"name", s.name}, {"hint", s.hint}});
  j["symbols"] = symbols;
  j["range_constraints"] = range_constraints_json(program);
  j["examples"] = examples_json(program);
  j["metadata"] = program.metadata;
  ordered_json entries = ordered_json::array();
  for (const auto& e : facts.entries) {
    entries.push_back({{"name", e.name}, {"size", e.size}, {"stored", e.stored}});
  }
  j["entries"] = entries;
  return j;
}

}  // namespace pt2rt::cli
