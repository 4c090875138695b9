// runtime/exec/bindings.h — a graph's calling convention, resolved from its descriptors
// at load.
//
// Graphs are called by descriptor, never by position (DESIGN.md "Descriptors"). At load each
// graph input and output descriptor is turned into a small (source, index) pair, so the
// per-call binding is a vector walk without string or map lookups:
//
//   inputs   Param/Buffer/Constant(fqn) → Weight (index into Program::weights)
//            Plain(i)                    → UserInput i
//            Saved(k)                    → Saved k            (backward only)
//            Tangent(output=Plain(i))    → Tangent i          (backward only)
//   outputs  Plain(i)                    → UserOutput i
//            InputMutation(of=Buffer or Param) → MutatedWeight (weight index; written back
//                                        under no grad after the call)
//            InputMutation(of=Plain(i))  → MutatedUserInput i
//            Saved(k), SavedNoVcCheck(k) → Saved k            (forward only)
//            Grad(of=Param(fqn))         → WeightGrad (weight index)   (backward only)
//            Grad(of=Plain(i))           → UserInputGrad i             (backward only)
//
// Any other descriptor (Philox seeds and offsets, effect tokens, subclass pieces, view and
// synthetic bases, intermediate bases, metadata mutations, Dummy) is representable in the
// archive but not handled by this runtime: loading fails naming it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt {

enum class InputSource : uint8_t { Weight, UserInput, Saved, Tangent };
enum class OutputSink : uint8_t {
  UserOutput, MutatedWeight, MutatedUserInput, Saved, WeightGrad, UserInputGrad
};

struct InputBinding {
  InputSource source;
  size_t index;
};

struct OutputBinding {
  OutputSink sink;
  size_t index;
  int64_t value;  ///< graph value id, -1 for None
};

struct GraphBindings {
  std::vector<InputBinding> inputs;    ///< per Graph::inputs
  std::vector<OutputBinding> outputs;  ///< per Graph::outputs
  /// Graph::inputs position of user input i (Plain(i)), for input checks and names.
  std::vector<size_t> user_input_positions;
  /// Graph value id of user output i (Plain(i)).
  std::vector<int64_t> user_output_values;
  size_t num_saved = 0;                ///< Saved(k) count (forward outputs / backward inputs)
  /// Per Saved k (forward): SavedNoVcCheck — AOTAutograd's activations stashed on ctx without
  /// a version-counter check (a custom autograd.Function's `ctx.x = x`), kept the same way.
  std::vector<bool> saved_without_version_check;
  size_t num_tangents = 0;
};

/// FQN → index into Program::weights, with the weight's kind.
using WeightIndex = std::map<std::string, size_t>;
WeightIndex index_weights(const Program& program);

/// Resolves `graph`'s descriptors. User input/output indices must be 0..n-1, each once;
/// Saved indices 0..k-1, each once; every FQN names a weight of the matching kind.
/// @throws FormatError naming the graph, the position and the descriptor.
GraphBindings bind_graph(const Program& program, const Graph& graph, const WeightIndex& weights);

}  // namespace pt2rt
