// cli/signature.h — the user-facing calling convention of a Program, read from its
// descriptors (never from positions): user inputs Plain(i), user outputs Plain(i),
// parameter/buffer counts; and readable forms of shapes (static or symbolic).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt::cli {

/// One user input or output of a graph: descriptor Plain(index).
struct UserValue {
  int64_t index = 0;                 ///< Plain descriptor index
  std::string name;                  ///< the graph value's name ("x"), "" for None outputs
  const TensorMeta* meta = nullptr;  ///< nullptr for non-tensor values or None outputs
};

/// The graph that defines the signature: the inference graph, else the forward graph,
/// else nullptr (an archive with no runnable graph).
const Graph* signature_graph(const Program& program);

/// Plain(i) inputs / outputs of `graph`, sorted by i.
std::vector<UserValue> user_inputs(const Graph& graph);
std::vector<UserValue> user_outputs(const Graph& graph);

/// "s0", "2*s0", "(s0 + 1)"; an expression over Program::symbols.
std::string sym_expr_string(const SymExpr& expr, const Program& program);
/// A size: the number when static, else its expression.
std::string dim_string(const Dim& dim, const Program& program);
/// "float32[32, 1, 8, 8]" or "float32[s0, 10]".
std::string meta_string(const TensorMeta& meta, const Program& program);

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
