// cli/program_text.h — the readable renderings of a decoded Program for `export-cli inspect`:
// the concise summary (the default) and one graph's full listing (`--graph ROLE`), in the
// style of torch.export's `print(exported_program)`. Only the Program IR of pt2rt/program.h
// is used. The JSON renderings are program_json.h and graph_json.h.
#pragma once

#include <ostream>

#include "archive_facts.h"
#include "pt2rt/program.h"

namespace pt2rt::cli {

/// The summary, a screenful for any model: archive and schema versions, producer; the
/// signature (user inputs and outputs with name, dtype and shape — symbolic dims by name —
/// and the range constraints); parameter and buffer counts and bytes; each graph's node count
/// and its inputs and outputs counted by descriptor kind; bundled examples; metadata (the
/// first 16 keys, values cut at 100 bytes); where the archive's bytes go (size_breakdown).
/// No node is listed.
void print_summary(std::ostream& out, const ArchiveFacts& facts, const Program& program);

/// One graph in full: its inputs with type and descriptor, one line per node
/// (`%addmm = aten::addmm(%fc1.bias, %x, %t)  # float32[4, 10]`), its outputs with
/// descriptors, then the node count and the op histogram.
void print_graph(std::ostream& out, const Program& program, const Graph& graph);

}  // namespace pt2rt::cli
