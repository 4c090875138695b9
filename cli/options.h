// cli/options.h — cxxopts helpers shared by the subcommands (kept out of cli.h: cxxopts.hpp
// is slow to compile, and only the subcommand files parse options).
#pragma once

#include <c10/core/Device.h>
#include <cxxopts.hpp>
#include <optional>
#include <string>

#include "cli.h"
#include "pt2rt/load_options.h"

namespace pt2rt::cli {

/// Adds -h/--help to `options` and parses `argv`. Positional arguments belong in the option
/// group "positional" (left out of the help text; named by positional_help instead). When --help
/// was given, prints the help text to stdout and sets `*help_shown` (the caller then returns
/// kExitOk).
/// @throws cxxopts::exceptions::exception on unknown options or bad values; UsageError on an
///         unexpected positional argument, or an option whose value is the next option
///         (`--outputs --train`; `--outputs=--train` states such a value on purpose).
cxxopts::ParseResult parse_options(cxxopts::Options& options, int argc, char** argv,
                                   bool* help_shown);

/// The value of positional option `name`, or UsageError "missing <what>".
std::string require_positional(const cxxopts::ParseResult& result, const std::string& name,
                               const std::string& what);

/// The options of a subcommand whose one positional argument is a `<model.pt2>` archive
/// (inspect, run, verify, train): program name "export-cli <command>", usage line
/// "... <model.pt2>", and the positional option "model" described by `model_help`. The caller
/// adds its own options, then calls parse_model_options.
cxxopts::Options model_options(const std::string& command, const std::string& description,
                               const std::string& model_help);

/// A parsed model subcommand command line: the options and the checked archive path.
struct ModelArgs {
  cxxopts::ParseResult result;
  std::string path;  ///< the <model.pt2> argument, a regular file
};

/// Adds the options that widen what loading lets an archive do (pt2rt/load_options.h; the
/// defaults are pt2rt's untrusted-archive policy): --allow-op NAME (repeatable),
/// --max-run-bytes N, --max-run-work N, --trusted (no run bounds, dynamic shapes accepted;
/// the operator policy still applies), and --map (LoadOptions::map_weights).
void add_load_options(cxxopts::Options& options);
/// The LoadOptions those options give.
/// @throws UsageError for a bound that is not a positive integer.
LoadOptions load_options(const cxxopts::ParseResult& result);

/// Adds --inference-only (LoadOptions::inference_only) and --onednn-benchmark
/// (LoadOptions::onednn_benchmark, implies --inference-only), --cuda-graphs
/// (LoadOptions::cuda_graphs): the deployment loads of `run` and `profile`.
void add_deployment_options(cxxopts::Options& options);
/// Sets `load`'s inference_only / onednn_benchmark / cuda_graphs from those options.
/// @throws UsageError when `train` with --inference-only / --onednn-benchmark (a training
///   call needs the forward/backward graphs), or --cuda-graphs without a CUDA `device`.
void apply_deployment_options(const cxxopts::ParseResult& result, bool train, c10::Device device,
                              LoadOptions& load);

/// Whether --cuda-graphs was given (LoadOptions::cuda_graphs; `run`, `profile`, `train`).
/// @throws UsageError when given without a CUDA `device`.
bool cuda_graphs_option(const cxxopts::ParseResult& result, c10::Device device);

/// parse_options on options made by model_options, then the <model.pt2> argument checked by
/// require_file ("model archive"). std::nullopt when --help was shown (the caller then returns
/// kExitOk).
/// @throws UsageError when <model.pt2> is missing or not a regular file;
///         cxxopts::exceptions::exception on unknown options or bad values.
std::optional<ModelArgs> parse_model_options(cxxopts::Options& options, int argc, char** argv);

}  // namespace pt2rt::cli
