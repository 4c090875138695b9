// cli/archive_facts.cpp — an archive's version entries, entries, and size breakdown.
#include "archive_facts.h"

#include <iomanip>
#include <sstream>

#include "pt2rt/constants.h"

namespace pt2rt::cli {
namespace {

std::string read_text_entry(const Archive& archive, const std::string& name) {
  auto bytes = archive.read(name, 4096);
  return std::string(bytes.begin(), bytes.end());
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

uint64_t tensor_bytes(const std::vector<TensorData>& tensors) {
  uint64_t n = 0;
  for (const auto& t : tensors) n += t.data.size();
  return n;
}

uint64_t tensor_bytes(const std::vector<std::pair<std::string, TensorData>>& tensors) {
  uint64_t n = 0;
  for (const auto& [name, t] : tensors) n += t.data.size();
  return n;
}

/// The decoded bytes of the bundled examples: input and reference tensors, and the float64
/// statistics and projections of each gradient sketch.
uint64_t example_bytes(const Program& program) {
  uint64_t n = 0;
  for (const auto& ex : program.examples) {
    n += tensor_bytes(ex.inputs);
    if (!ex.references) continue;
    const ExampleReferences& r = *ex.references;
    n += tensor_bytes(r.outputs) + tensor_bytes(r.train_outputs) + tensor_bytes(r.grad_outputs) +
         tensor_bytes(r.grads) + tensor_bytes(r.buffers);
    for (const auto& s : r.grad_sketches) n += sizeof(double) * (4 + s.projections.size());
  }
  return n;
}

}  // namespace

ArchiveFacts read_archive_facts(const std::string& path, const Archive& archive) {
  ArchiveFacts facts;
  facts.path = path;
  facts.file_bytes = archive.size();
  facts.archive_format = read_text_entry(archive, kArchiveFormatEntry);
  facts.archive_version = read_text_entry(archive, kArchiveVersionEntry);
  facts.entries = archive.entries();
  return facts;
}

std::vector<SizePart> size_breakdown(const ArchiveFacts& facts, const Program& program) {
  uint64_t weights = 0, program_fb = 0, optimizer = 0, extra = 0, versions = 0, other = 0;
  uint64_t stored = 0;
  for (const auto& e : facts.entries) {
    const uint64_t n = e.compressed_size;
    stored += n;
    if (starts_with(e.name, kWeightsPrefix)) {
      weights += n;
    } else if (e.name == kProgramEntry) {
      program_fb += n;
    } else if (starts_with(e.name, kOptimizerPrefix)) {
      optimizer += n;
    } else if (starts_with(e.name, kExtraPrefix)) {
      extra += n;
    } else if (e.name == kArchiveFormatEntry || e.name == kArchiveVersionEntry) {
      versions += n;
    } else {
      other += n;
    }
  }
  std::vector<SizePart> parts = {{kWeightsPrefix, weights}, {kProgramEntry, program_fb}};
  if (const uint64_t examples = example_bytes(program)) {
    parts.push_back({"bundled examples", examples, /*within_program=*/true});
  }
  if (optimizer) parts.push_back({std::string(kOptimizerPrefix) + " (training state)", optimizer});
  if (extra) parts.push_back({kExtraPrefix, extra});
  if (versions) parts.push_back({"format and version", versions});
  if (other) parts.push_back({"other entries", other});
  if (facts.file_bytes > stored) parts.push_back({"zip structure", facts.file_bytes - stored});
  return parts;
}

std::string human_bytes(uint64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  if (bytes < 1024) {
    out << bytes << " B";
  } else if (bytes < (uint64_t{1} << 20)) {
    out << bytes / 1024.0 << " KiB";
  } else if (bytes < (uint64_t{1} << 30)) {
    out << bytes / 1048576.0 << " MiB";
  } else {
    out << bytes / 1073741824.0 << " GiB";
  }
  return out.str();
}

}  // namespace pt2rt::cli
