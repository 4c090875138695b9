// cli/options.cpp — cxxopts parsing helpers shared by the subcommands.
#include "options.h"

#include <iostream>

namespace pt2rt::cli {

cxxopts::ParseResult parse_options(cxxopts::Options& options, int argc, char** argv,
                                   bool* help_shown) {
  options.add_options()("h,help", "Print this help and exit");
  auto result = options.parse(argc, argv);
  *help_shown = result.count("help") > 0;
  // Positional arguments are declared in the group "positional" and shown in the usage line.
  if (*help_shown) std::cout << options.help({""}) << std::flush;
  return result;
}

std::string require_positional(const cxxopts::ParseResult& result, const std::string& name,
                               const std::string& what) {
  if (result.count(name) == 0) throw UsageError("missing " + what + " (see --help)");
  return result[name].as<std::string>();
}

cxxopts::Options model_options(const std::string& command, const std::string& description,
                               const std::string& model_help) {
  cxxopts::Options options("export-cli " + command, description);
  options.positional_help("<model.pt2>").show_positional_help();
  options.add_options("positional")("model", model_help, cxxopts::value<std::string>());
  options.parse_positional({"model"});
  return options;
}

std::optional<ModelArgs> parse_model_options(cxxopts::Options& options, int argc, char** argv) {
  bool help = false;
  ModelArgs args{parse_options(options, argc, argv, &help), {}};
  if (help) return std::nullopt;
  args.path = require_positional(args.result, "model", "<model.pt2>");
  require_file(args.path, "model archive");
  return args;
}

}  // namespace pt2rt::cli
