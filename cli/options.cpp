// cli/options.cpp — cxxopts parsing helpers shared by the subcommands.
#include "options.h"

#include <algorithm>
#include <cctype>
#include <iostream>
#include <vector>

#include "pt2rt/text.h"

namespace pt2rt::cli {

namespace {

/// Whether `argv` holds `--name=value` literally (a value that starts with '-' given on
/// purpose).
bool given_inline(const std::string& name, const std::string& value, int argc, char** argv) {
  const std::string token = "--" + name + "=" + value;
  for (int i = 1; i < argc; ++i) {
    if (token == argv[i]) return true;
  }
  return false;
}

/// Strict parsing, as argparse and cxxopts' own checks do for unknown options: an extra
/// positional word, or an option whose value is the next option (`--outputs --train` took
/// "--train" as the file name), is a usage error naming it.
void check_strict(const cxxopts::Options& options, const cxxopts::ParseResult& result, int argc,
                  char** argv) {
  std::vector<std::string> positional;
  for (const auto& d : options.group_help("positional").options) {
    positional.insert(positional.end(), d.l.begin(), d.l.end());
  }
  for (const cxxopts::KeyValue& kv : result.arguments()) {
    const std::string& v = kv.value();
    const bool option_like = v.size() > 1 && v[0] == '-' && (v[1] == '-' || std::isalpha(
                                                                 static_cast<unsigned char>(v[1])));
    if (!option_like ||
        std::find(positional.begin(), positional.end(), kv.key()) != positional.end() ||
        given_inline(kv.key(), v, argc, argv)) {
      continue;
    }
    throw UsageError("--" + kv.key() + " needs a value, but the next argument is the option " +
                     quoted(v, 64) + " (write --" + kv.key() + "=" + escaped(v, 64) +
                     " if that is the value)");
  }
  if (!result.unmatched().empty()) {
    throw UsageError("unexpected argument " + quoted(result.unmatched().front(), 64) +
                     " (see --help)");
  }
}

}  // namespace

cxxopts::ParseResult parse_options(cxxopts::Options& options, int argc, char** argv,
                                   bool* help_shown) {
  // --verbose is taken out of argv by main() (any subcommand); listed here for --help, and
  // parsed again by `save`, which main() hands it to.
  options.add_options()("verbose", "errors in full: an execution error's node arguments and "
                                   "export stack trace; for save, the exporter's traceback")
      ("h,help", "Print this help and exit");
  auto result = options.parse(argc, argv);
  *help_shown = result.count("help") > 0;
  if (!*help_shown) check_strict(options, result, argc, argv);
  // Positional arguments are declared in the group "positional" and shown in the usage line.
  if (*help_shown) {
    std::vector<std::string> groups = {""};
    for (const std::string& g : options.groups()) {
      if (g != "" && g != "positional") groups.push_back(g);
    }
    std::cout << options.help(groups) << std::flush;
  }
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

void add_load_options(cxxopts::Options& options) {
  // clang-format off
  options.add_options("archive trust")
      ("allow-op", "let the archive call this operator although pt2rt's operator policy "
       "refuses it: ns::name (every overload) or ns::name.overload; repeatable",
       cxxopts::value<std::vector<std::string>>())
      ("max-run-bytes", "bound on one graph run's peak tensor bytes (default: max(32 MiB, "
       "16 x archive size))", cxxopts::value<std::string>())
      ("max-run-work", "bound on the element operations of one inference call plus one "
       "training step (default: max(5e8, 500 x S x max(1, S/1MiB)) for an archive of S "
       "bytes)", cxxopts::value<std::string>())
      ("trusted", "the archive comes from a trusted source: no run bounds, dynamic shapes "
       "accepted (the operator policy still applies; see --allow-op)");
  options.add_options("loading")
      ("map", "memory-map the archive instead of reading it (LoadOptions::map_weights): "
       "weights view the file, load is O(metadata); the entries' CRCs are checked on a "
       "background thread, which the first call waits for")
      ("map-unchecked", "with --map: do not check the entries' CRCs (runs the mapped bytes "
       "as they are; LoadOptions::check_mapped_weights = false)");
  // clang-format on
}

void add_deployment_options(cxxopts::Options& options) {
  // clang-format off
  options.add_options()
      ("inference-only", "load as a deployment does (LoadOptions::inference_only): only the "
       "inference graph; values computed from weights alone cached, oneDNN convolution "
       "weights packed once")
      ("onednn-benchmark", "implies --inference-only; on CPU, time each convolution and linear "
       "layer at load with ATen's kernel and with oneDNN and run the faster "
       "(LoadOptions::onednn_benchmark: results then differ from eager PyTorch by float "
       "rounding)")
      ("cuda-graphs", "with --device cuda: record calls into CUDA graphs once per input "
       "shape and replay them (LoadOptions::cuda_graphs; with --train the forward and the "
       "backward). run: the outputs shown are a replay's; profile: call times are replays' "
       "(no per-node rows)");
  // clang-format on
}

void apply_deployment_options(const cxxopts::ParseResult& result, bool train, c10::Device device,
                              LoadOptions& load) {
  load.onednn_benchmark = result.count("onednn-benchmark") > 0;
  load.inference_only = load.onednn_benchmark || result.count("inference-only") > 0;
  if (train && load.inference_only) {
    throw UsageError("--train cannot run on an --inference-only / --onednn-benchmark load");
  }
  load.cuda_graphs = cuda_graphs_option(result, device);
}

bool cuda_graphs_option(const cxxopts::ParseResult& result, c10::Device device) {
  const bool on = result.count("cuda-graphs") > 0;
  if (on && !device.is_cuda()) {
    throw UsageError("--cuda-graphs needs --device cuda (it records CUDA kernels)");
  }
  return on;
}

LoadOptions load_options(const cxxopts::ParseResult& result) {
  LoadOptions o;
  auto bound = [&](const char* name) -> uint64_t {
    if (!result.count(name)) return 0;
    const std::string text = result[name].as<std::string>();
    size_t used = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || v == 0 || text[0] == '-') {
      throw UsageError(std::string("--") + name + " must be a positive integer, got '" + text + "'");
    }
    return v;
  };
  o.run.max_bytes = bound("max-run-bytes");
  o.run.max_work = bound("max-run-work");
  if (result.count("trusted")) {
    o.run.max_bytes = o.run.max_work = RunLimits::kUnlimited;
    o.allow_symbolic_shapes = true;
  }
  o.map_weights = result.count("map") != 0;
  if (result.count("map-unchecked")) {
    if (!o.map_weights) throw UsageError("--map-unchecked needs --map");
    o.check_mapped_weights = false;
  }
  if (result.count("allow-op")) o.allow_operators = result["allow-op"].as<std::vector<std::string>>();
  return o;
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
