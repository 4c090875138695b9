// cli/graph_dot.h — Graphviz pictures of a Program's graphs (`export-cli inspect --dot/--svg`).
//
// One `digraph`, one cluster per graph (inference, forward, backward, joint). Inside a cluster:
// graph inputs and outputs as ellipses labelled with their name, AOTAutograd descriptor
// (`ParamAOTInput(target='fc.weight')`, `SavedForBackwardsAOTOutput(idx=0)`) and type; nodes
// as boxes labelled with the op overload and each result's dtype[shape]; edges from each value's
// producer to its users. Forward `Saved(k)` / `SavedNoVcCheck(k)` outputs are joined to the
// backward `Saved(k)` input by bold red edges (the saved activations). Archive text is escaped
// for DOT (quotes, backslashes; control bytes as \xNN), so any archive gives a valid file.
#pragma once

#include <ostream>
#include <string>

#include "pt2rt/program.h"

namespace pt2rt::cli {

/// Writes the DOT source of every graph of `program`.
void write_dot(std::ostream& out, const Program& program);

/// Renders `dot_path` to SVG at `svg_path` with Graphviz's `dot -Tsvg` (found on PATH).
/// @throws UsageError when `dot` is not installed (naming the Debian package, graphviz) or
///   fails.
void render_svg(const std::string& dot_path, const std::string& svg_path);

}  // namespace pt2rt::cli
