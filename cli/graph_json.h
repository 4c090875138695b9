// cli/graph_json.h — `export-cli inspect --graph ROLE --json`: one graph as structured nodes,
// the JSON counterpart of torch.export's `ExportedProgram.graph` (torch.fx Graph: each node's
// target op overload, args and kwargs, and its `meta["val"]` dtype and shape).
//
//   {"role": "forward", "num_nodes": 12, "op_histogram": {"aten::addmm": 2, ...},
//    "inputs":  [{"name": "x", "kind": "Tensor", "type": "float32[batch, 16]",
//                 "dtype": "float32", "shape": ["batch", 16],
//                 "descriptor": {"kind": "Plain", "idx": 0, "repr": "PlainAOTInput(idx=0)"}}, ...],
//    "outputs": [... the same, "name": null for a None output ...],
//    "nodes": [{"name": "addmm", "op": "aten::addmm", "module": "fc1",
//               "inputs": [{"arg": "self", "value": "fc1.bias"},
//                          {"arg": "mat1", "value": "x"}, ...,
//                          {"arg": "beta", "constant": 1}],
//               "outputs": [{"name": "addmm", "kind": "Tensor", "type": "float32[batch, 10]",
//                            "dtype": "float32", "shape": ["batch", 10]}]}, ...]}
//
// A node input is {"arg": schema argument name, and one of: "value": the name of the graph
// value it reads; "values": a list of value names (Tensor[]; null for a None in Tensor?[];
// a SymInt[] list mixes value names and literal integers); "constant": the literal (numbers,
// booleans, strings, null for None, "torch.float32" for a dtype, a layout / memory format /
// device as its name)}, plus "kwarg_only": true for keyword-only arguments. The node's name is
// its FX node name (its first output's name when the archive has none).
#pragma once

#include <nlohmann/json.hpp>

#include "pt2rt/program.h"

namespace pt2rt::cli {

/// `graph` of `program` as above; value ids and op indices out of range (a damaged archive
/// that was not validated) are shown as "<bad value id>" / "<bad op index>", never read.
nlohmann::ordered_json graph_json(const Program& program, const Graph& graph);

}  // namespace pt2rt::cli
