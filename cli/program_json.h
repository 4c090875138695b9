// cli/program_json.h — `export-cli inspect --json`: the facts of an archive as one JSON object
// (the keys are listed in docs/cli.md, "Inspecting an archive"). Only the Program IR of
// pt2rt/program.h is used. Symbolic sizes are strings ("batch", "2*batch"), static ones
// numbers, as torch.export's ExportedProgram shows them in `graph_signature` and node metas.
#pragma once

#include <nlohmann/json.hpp>

#include "archive_facts.h"
#include "pt2rt/program.h"

namespace pt2rt::cli {

/// The summary: path, archive_format, archive_version, archive_bytes, size (the
/// size_breakdown parts), schema_version, producer, signature (weight counts, user inputs and
/// outputs with dtype and shape; outputs also "output_name", the stored name: "['logits']"), graphs (role, num_nodes, op_histogram, inputs and outputs
/// with descriptors), weights, weights_total_bytes, symbols, range_constraints, examples,
/// metadata, entries.
nlohmann::ordered_json summary_json(const ArchiveFacts& facts, const Program& program);

/// Value `id` of `graph`: {"name", "kind" (ValueKind, "None" for id -1), "type" (readable),
/// and "dtype" and "shape" for a tensor with metadata, "expr" for a SymInt/SymFloat/SymBool}.
/// The name is null for id -1 (a None output).
nlohmann::ordered_json value_json(const Program& program, const Graph& graph, int64_t id);

/// A tensor's sizes: numbers for static sizes, expressions over the symbols as strings.
nlohmann::ordered_json shape_json(const TensorMeta& meta, const Program& program);

/// A descriptor as JSON: {"kind": "Param", "fqn": ..., "repr": "ParamAOTInput(...)"} /
/// {"kind": "Grad", "of": {...}, "repr": ...}; index-carrying kinds give "idx".
nlohmann::ordered_json descriptor_json(const InputDescriptor& d);
nlohmann::ordered_json descriptor_json(const OutputDescriptor& d);

/// Op overload -> node count (op_histogram), as one object.
nlohmann::ordered_json op_histogram_json(const Program& program, const Graph& graph);

/// A graph's inputs or outputs: value_json of each plus its "descriptor"; a Plain output also
/// its "output_name" (Program::output_names, "[i]" before schema 1.4).
nlohmann::ordered_json graph_inputs_json(const Program& program, const Graph& graph);
nlohmann::ordered_json graph_outputs_json(const Program& program, const Graph& graph);

}  // namespace pt2rt::cli
