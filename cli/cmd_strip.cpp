// export-cli strip — a deployment copy of a model.pt2 (ONNX Runtime's "export for
// inferencing" analogue).
//
//   export-cli strip <model.pt2> <out.pt2> --inference-only | --training-state
//
// --inference-only keeps the inference graph, the weights and the bundled examples' inputs and
// eval-mode references, and removes what only training needs: the forward, backward and joint
// graphs, the examples' training references (pt2rt::strip_training) and the training state
// (optimizer/*, pt2rt/training_state.h). The copy runs and verifies like the original in eval
// mode; `train` refuses it (no forward/backward graphs).
// --training-state removes only the training state: the copy trains again, but `train
// --resume` refuses it.
// The write is atomic (temp file, fsync, rename); <out.pt2> may be <model.pt2> itself.
#include <sys/stat.h>

#include <iostream>

#include "cli.h"
#include "options.h"
#include "pt2rt/archive.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/constants.h"
#include "pt2rt/program.h"

namespace pt2rt::cli {
namespace {

uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

}  // namespace

int cmd_strip(int argc, char** argv) {
  cxxopts::Options options("export-cli strip",
                           "Write a deployment copy of a pt2rt archive without what only "
                           "training needs.\n");
  options.positional_help("<model.pt2> <out.pt2>").show_positional_help();
  // clang-format off
  options.add_options("positional")
      ("model", "archive to strip", cxxopts::value<std::string>())
      ("out", "where to write the stripped copy (atomically)", cxxopts::value<std::string>());
  options.add_options()
      ("inference-only", "remove the forward/backward graphs, the examples' training "
                         "references and the training state (optimizer/*); keep the inference "
                         "graph and the weights")
      ("training-state", "remove only the training state (optimizer/*) that train --save "
                         "stored for --resume");
  // clang-format on
  options.parse_positional({"model", "out"});
  bool help = false;
  const cxxopts::ParseResult result = parse_options(options, argc, argv, &help);
  if (help) return kExitOk;
  const std::string path = require_positional(result, "model", "<model.pt2>");
  const std::string out = require_positional(result, "out", "<out.pt2>");
  require_file(path, "model archive");
  const bool inference_only = result.count("inference-only") > 0;
  if (inference_only == (result.count("training-state") > 0)) {
    throw UsageError("say what to strip: --inference-only or --training-state (one of them)");
  }
  const Archive archive = Archive::open(path);
  const std::vector<uint8_t> program = read_program_bytes(archive);
  WriteOptions write;
  write.omit_prefixes = {kOptimizerPrefix};
  if (!inference_only) {
    write_archive_copy(out, archive, {}, write);
    std::cout << "wrote " << out << ": without training state, " << file_size(out)
              << " bytes (was " << file_size(path) << ")\n";
    return kExitOk;
  }
  const std::vector<uint8_t> stripped = strip_training(program.data(), program.size());
  write_archive_copy(out, archive, {NewEntry{kProgramEntry, {stripped.data(), stripped.size()}}},
                     write);
  const uint64_t before = file_size(path), after = file_size(out);
  std::cout << "wrote " << out << ": inference graph only, " << after << " bytes (was " << before
            << ", program.fb " << program.size() << " -> " << stripped.size() << " bytes)\n";
  return kExitOk;
}

}  // namespace pt2rt::cli
