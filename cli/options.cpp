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

}  // namespace pt2rt::cli
