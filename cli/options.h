// cli/options.h — cxxopts helpers shared by the subcommands (kept out of cli.h: cxxopts.hpp
// is slow to compile, and only the subcommand files parse options).
#pragma once

#include <cxxopts.hpp>
#include <string>

#include "cli.h"

namespace pt2rt::cli {

/// Adds -h/--help to `options` and parses `argv`. Positional arguments belong in the option
/// group "positional" (left out of the help text; named by positional_help instead). When --help
/// was given, prints the help text to stdout and sets `*help_shown` (the caller then returns
/// kExitOk).
/// @throws cxxopts::exceptions::exception on unknown options or bad values.
cxxopts::ParseResult parse_options(cxxopts::Options& options, int argc, char** argv,
                                   bool* help_shown);

/// The value of positional option `name`, or UsageError "missing <what>".
std::string require_positional(const cxxopts::ParseResult& result, const std::string& name,
                               const std::string& what);

}  // namespace pt2rt::cli
