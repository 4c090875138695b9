// pt2rt/signature.h — a program's calling convention: its user inputs and outputs, by name.
//
// The analogue of ExecuTorch's `Module::method_meta()` (MethodMeta / TensorInfo: per input and
// output its dtype and sizes, https://pytorch.org/executorch/stable/extension-module.html) and
// of torch.export's `ExportedProgram.graph_signature` user inputs/outputs
// (https://pytorch.org/docs/stable/export.html), read from the graph that defines the
// signature (the inference graph, else the forward graph) by descriptor — user input i is
// `Plain(i)`, user output i is `Plain(i)` — never by position.
//
// Names: an input is named after the parameter of the original `forward()` it was passed as
// (`x`, `mask`; varargs `args_0`, ...), which is also the keyword Model::forward(args, kwargs)
// takes. An output is named after its place in forward()'s return value, written as
// `torch.utils._pytree.keystr` writes a pytree path: `['logits']` (dict key), `[1]` (tuple or
// list position), `.field` (namedtuple), nested paths concatenated; `output` when forward()
// returns one tensor. Archives before schema 1.4 carry no output names: their outputs are
// named positionally, `[0]`, `[1]`, ...
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt {

/// One dimension of a user input or output.
struct DimSpec {
  /// The static size; for a symbolic dim, the size seen at export (the symbol's hint).
  int64_t size = 0;
  /// "" for a static dim; the symbol's name ("batch") for a dim that is one symbol; the
  /// expression over symbols for a derived dim ("(1 + batch)", "(2 * n)").
  std::string expr;
  /// True when the dim is one symbol (it binds that symbol at each call).
  bool is_symbol = false;
  /// Inclusive range of sizes a call may use: static dims min == max == size; a symbol its
  /// range constraint (torch.export's `range_constraints`); a derived dim its expression at
  /// the symbols' minima and maxima (sizes grow with their symbols). INT64_MAX: unbounded.
  int64_t min = 0;
  int64_t max = 0;
  bool is_static() const { return expr.empty(); }
};

/// One user input or output (ExecuTorch's TensorInfo, with a name).
struct TensorSpec {
  std::string name;
  int64_t index = 0;       ///< i of its Plain(i) descriptor (its position in forward())
  bool is_tensor = false;  ///< false for a None output (dtype and sizes then unset)
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<DimSpec> sizes;
  /// "float32[batch, 8]".
  std::string to_string() const;
};

/// A symbol of a dynamic export with its range (torch.export `Dim`, `range_constraints`).
struct SymbolSpec {
  std::string name;
  int64_t hint = 0;        ///< the size seen at export
  int64_t min = 0;         ///< inclusive
  int64_t max = INT64_MAX; ///< inclusive; INT64_MAX: unbounded
};

struct Signature {
  std::vector<TensorSpec> inputs;   ///< user inputs in forward() order (Plain(0), Plain(1), ...)
  std::vector<TensorSpec> outputs;  ///< user outputs in flattened return order
  std::vector<SymbolSpec> symbols;  ///< Program::symbols; empty for a static export
  /// forward()'s parameters as exported, with their structures (Program::inputs, schema 1.6);
  /// for older archives one Tensor parameter per input, named as the input.
  std::vector<InputParam> params;
  /// Index of the input / output with this name, or -1.
  int64_t input_index(const std::string& name) const;
  int64_t output_index(const std::string& name) const;
};

/// The graph that defines the signature: the inference graph, else the forward graph, else
/// nullptr (a program with no runnable graph).
const Graph* signature_graph(const Program& program);

/// The signature of `program` (everything copied out: it does not refer into the Program).
/// Empty when the program has no inference or forward graph.
Signature program_signature(const Program& program);

/// The name of output `i` of an archive without output names (before schema 1.4): "[i]".
std::string positional_output_name(size_t i);

/// Python's spelling of a dtype without "torch.": Float → "float32", Long → "int64".
std::string dtype_name(c10::ScalarType dtype);

/// A SymExpr over Program::symbols as text: "batch", "(1 + batch)", "(2 * n)", "-(n)",
/// "max(a, b)". The one printer behind every symbolic shape pt2rt shows (inspect, errors).
std::string sym_expr_string(const SymExpr& expr, const Program& program);

/// A size: the number when static, else sym_expr_string of its expression.
std::string dim_string(const Dim& dim, const Program& program);

/// "float32[batch, 2, 4]" from a graph value's TensorMeta.
std::string meta_string(const TensorMeta& meta, const Program& program);

}  // namespace pt2rt
