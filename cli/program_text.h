// cli/program_text.h — readable and JSON renderings of a decoded Program, for
// `export-cli inspect`. Only the Program IR of pt2rt/program.h is used.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "pt2rt/archive.h"
#include "pt2rt/program.h"

namespace pt2rt::cli {

/// Facts about the archive file itself (from the zip central directory).
struct ArchiveFacts {
  std::string path;
  std::string archive_format;   ///< content of archive_format
  std::string archive_version;  ///< content of archive_version
  std::vector<EntryInfo> entries;
};

/// The summary: versions, producer, signature, weights, range constraints, examples, graphs
/// (node count, op histogram, inputs and outputs with descriptors).
void print_summary(std::ostream& out, const ArchiveFacts& facts, const Program& program);

/// One graph's nodes, one per line: `%addmm = aten::addmm(%bias, %x, %t)`.
void print_graph(std::ostream& out, const Program& program, const Graph& graph);

/// The nodes of `graph`, one string each, as print_graph shows them.
std::vector<std::string> node_lines(const Program& program, const Graph& graph);

/// The same facts as print_summary as one JSON object (keys in README_cli.md).
nlohmann::ordered_json summary_json(const ArchiveFacts& facts, const Program& program);

/// A descriptor as JSON: {"kind": "Param", "fqn": ...} / {"kind": "Grad", "of": {...}}.
nlohmann::ordered_json descriptor_json(const InputDescriptor& d);
nlohmann::ordered_json descriptor_json(const OutputDescriptor& d);

}  // namespace pt2rt::cli
