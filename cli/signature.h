// cli/signature.h — what export-cli reads of a Program's calling convention beyond
// pt2rt/signature.h (the library's signature, shape printer and dtype names): the graph values
// of the user inputs/outputs (by descriptor, never by position), parameter/buffer counts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pt2rt/program.h"
#include "pt2rt/signature.h"  // signature_graph, meta_string, dim_string, sym_expr_string

namespace pt2rt::cli {

/// One user input or output of a graph: descriptor Plain(index).
struct UserValue {
  int64_t index = 0;                 ///< Plain descriptor index
  std::string name;                  ///< the graph value's name ("x"), "" for None outputs
  const TensorMeta* meta = nullptr;  ///< nullptr for non-tensor values or None outputs
  /// Outputs: the stored output name (Program::output_names, a pytree keystr: "['logits']",
  /// "[1]", "output"; "[i]" before schema 1.4, as Model::signature() names them). Inputs: "".
  std::string output_name;
};

/// Plain(i) inputs / outputs of `graph` (one of `program`'s graphs), sorted by i.
std::vector<UserValue> user_inputs(const Graph& graph);
std::vector<UserValue> user_outputs(const Program& program, const Graph& graph);

/// Element counts of parameters (all, trainable) — from Program::weights.
struct WeightCounts {
  int64_t parameters = 0, trainable = 0, buffers = 0, constants = 0;
  int64_t parameter_elements = 0, trainable_elements = 0;
  uint64_t bytes = 0;
};
WeightCounts count_weights(const Program& program);

/// Dimension 0 of user input 0 when it is static (the archive's fixed batch size).
std::optional<int64_t> static_batch_size(const Program& program);

}  // namespace pt2rt::cli
