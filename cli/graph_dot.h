// cli/graph_dot.h — Graphviz pictures of a Program's graphs (`export-cli inspect --dot/--svg`).
//
// One `digraph`, one cluster per graph (inference, forward, backward, joint; or the one graph
// DotOptions::role names). Inside a graph's cluster, the nodes of each module (the node's
// `nn_module_stack` FQN, cut to DotOptions::module_depth components, e.g. `features.3`) form
// a nested cluster labelled with that FQN, so a large graph reads as its model's blocks.
// Inside a cluster:
// graph inputs and outputs as ellipses labelled with their name, AOTAutograd descriptor
// (`ParamAOTInput(target='fc.weight')`, `SavedForBackwardsAOTOutput(idx=0)`) and type; nodes
// as boxes labelled with the op overload and each result's dtype[shape]; edges from each value's
// producer to its users. Forward `Saved(k)` / `SavedNoVcCheck(k)` outputs are joined to the
// backward `Saved(k)` input by bold red edges (the saved activations) when the picture has at
// most 400 nodes (beyond, such edges make Graphviz's layout super-linear: the labels pair them). Archive text is escaped
// for DOT (quotes, backslashes; control bytes as \xNN), so any archive gives a valid file.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>

#include "pt2rt/program.h"

namespace pt2rt::cli {

struct DotOptions {
  std::optional<GraphRole> role;  ///< only this graph; every graph when empty
  /// Module clusters: FQN components kept (0: no module clusters).
  size_t module_depth = 2;
};

/// Writes the DOT source of the graphs of `program` that `options` selects.
/// @returns the number of graph nodes written (boxes, not inputs/outputs).
size_t write_dot(std::ostream& out, const Program& program, const DotOptions& options = {});

/// Writes `text` to `path` atomically (temp file in its directory, fsync, rename).
/// @throws UsageError naming `path` when it cannot be written.
void write_text_atomically(const std::string& text, const std::string& path);

/// Renders the DOT source `dot` to SVG at `svg_path` with Graphviz's `dot -Tsvg` (found on
/// PATH), reading it from an anonymous temporary file and writing the SVG atomically (temp
/// file in the target's directory, rename): an interrupted or failed render leaves no file
/// behind. Above 1,000 nodes, dot's crossing minimisation and network-simplex passes are
/// bounded (`-Gmclimit`, `-Gnslimit`, Graphviz attributes) so the layout time stays near
/// linear; while dot runs, one line every 10 s on stderr says how long it has been running.
/// @throws UsageError when `dot` is not installed (naming the Debian package, graphviz), fails
///   or the SVG cannot be written.
void render_svg(const std::string& dot, size_t nodes, const std::string& svg_path);

}  // namespace pt2rt::cli
