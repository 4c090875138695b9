// export-cli save — export a PyTorch model by running pt2rt's Python exporter.
//
//   export-cli save <file.py|module>:<callable> <out.pt2> [--inputs in.pt] [--no-train]
//                   [--no-inference] [--no-examples] [--full-references]
//                   [--partitioner default|min_cut]
//                   [--optimize-inference] [--dynamic ARG:DIM=NAME[MIN,MAX] ...]
//                   [-- <more exporter options>]
//
// Runs `<python> -m pt2rt save <spec> <out.pt2> [options]` with its output streamed to
// ours. <python> is $PT2RT_PYTHON when set; otherwise the first of /usr/bin/python3,
// python3, python that can `import torch`. The exporter package is put on PYTHONPATH from
// the install tree (<prefix>/share/pt2rt/python) or the source tree, whichever exists.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "options.h"

namespace pt2rt::cli {
namespace {

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Directories holding the `pt2rt` Python package, best first.
std::vector<std::string> exporter_dirs() {
  std::vector<std::string> dirs;
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    std::string bin(exe, static_cast<size_t>(n));
    bin = bin.substr(0, bin.rfind('/'));
    std::string installed = bin + "/../share/pt2rt/python";
    if (is_dir(installed + "/pt2rt")) dirs.push_back(installed);
  }
#ifdef PT2RT_SOURCE_EXPORTER_DIR
  if (is_dir(std::string(PT2RT_SOURCE_EXPORTER_DIR) + "/pt2rt")) {
    dirs.push_back(PT2RT_SOURCE_EXPORTER_DIR);
  }
#endif
  return dirs;
}

/// Runs `argv` (PATH lookup) and waits; returns its exit status, or 127 when it could not
/// start, or 128+signal. With `quiet`, its stdout and stderr go to /dev/null.
int run_process(const std::vector<std::string>& argv, bool quiet, const std::string& pythonpath) {
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = ::fork();
  if (pid < 0) throw UsageError("cannot start " + argv[0] + ": fork failed");
  if (pid == 0) {
    if (quiet) {
      FILE* null = std::freopen("/dev/null", "w", stdout);
      (void)null;
      ::dup2(STDOUT_FILENO, STDERR_FILENO);
    }
    if (!pythonpath.empty()) {
      const char* old = std::getenv("PYTHONPATH");
      std::string value = pythonpath + (old && *old ? std::string(":") + old : "");
      ::setenv("PYTHONPATH", value.c_str(), 1);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 127;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 127;
}

/// The Python interpreter to run the exporter with (see the file comment).
std::string find_python() {
  if (const char* env = std::getenv("PT2RT_PYTHON"); env != nullptr && *env) {
    if (run_process({env, "-c", "import torch"}, true, "") != 0) {
      throw UsageError(std::string("PT2RT_PYTHON=") + env +
                       " cannot import torch (install PyTorch for it, or unset PT2RT_PYTHON)");
    }
    return env;
  }
  for (const char* candidate : {"/usr/bin/python3", "python3", "python"}) {
    if (run_process({candidate, "-c", "import torch"}, true, "") == 0) return candidate;
  }
  throw UsageError(
      "no Python with torch found (tried /usr/bin/python3, python3, python); set PT2RT_PYTHON "
      "to an interpreter that can `import torch`");
}

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

}  // namespace

int cmd_save(int argc, char** argv) {
  cxxopts::Options options(
      "export-cli save",
      "Export a PyTorch model to a pt2rt archive by running the Python exporter "
      "(python -m pt2rt save).\n<callable> returns (model, example_args), or a model whose "
      "example args come from --inputs.\nOptions after `--` go to the exporter unchanged.\n");
  options.positional_help("<file.py|module>:<callable> <out.pt2>").show_positional_help();
  // clang-format off
  options.add_options("positional")
      ("spec", "model", cxxopts::value<std::string>())
      ("out", "archive to write", cxxopts::value<std::string>())
      ("extra", "exporter options after --", cxxopts::value<std::vector<std::string>>());
  options.add_options()
      ("inputs", "torch.save file with a tuple/list of example input tensors",
       cxxopts::value<std::string>())
      ("no-train", "export the inference graph only (no forward/backward graphs)")
      ("no-inference", "skip the inference graph")
      ("no-examples", "do not bundle the example inputs and eager references")
      ("full-references", "bundle every gradient reference in full (default: compact "
       "sketches, a few numbers per gradient; the archive grows by about the weights' size)")
      ("optimize-inference", "fold BatchNorm into the convolution/linear before it in the "
       "inference graph (computed from the current weights; cached by the runtime)")
      ("partitioner", "forward/backward partitioner: default or min_cut",
       cxxopts::value<std::string>())
      ("dynamic", "a dynamic dim, e.g. x:0=batch[1,512] (repeatable; y:0=batch reuses it, "
       "y:0=batch+1 derives from it)", cxxopts::value<std::vector<std::string>>());
  // clang-format on
  options.parse_positional({"spec", "out", "extra"});
  bool help = false;
  auto result = parse_options(options, argc, argv, &help);
  if (help) return kExitOk;

  const std::string spec = require_positional(result, "spec", "<file.py|module>:<callable>");
  const std::string out = require_positional(result, "out", "<out.pt2>");
  const auto colon = spec.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == spec.size()) {
    throw UsageError("model '" + spec +
                     "' must be <file.py|module>:<callable>, e.g. "
                     "examples/digits/model.py:build");
  }
  const std::string source = spec.substr(0, colon);
  if (source.size() > 3 && source.compare(source.size() - 3, 3, ".py") == 0) {
    require_file(source, "model file");
  }
  if (result.count("inputs")) require_file(result["inputs"].as<std::string>(), "--inputs file");
  if (result.count("partitioner")) {
    const auto p = result["partitioner"].as<std::string>();
    if (p != "default" && p != "min_cut") {
      throw UsageError("--partitioner must be default or min_cut, got '" + p + "'");
    }
  }

  const std::string python = find_python();
  std::vector<std::string> cmd = {python, "-m", "pt2rt", "save", spec, out};
  if (result.count("inputs"))
    cmd.insert(cmd.end(), {"--inputs", result["inputs"].as<std::string>()});
  for (const char* flag :
       {"no-train", "no-inference", "no-examples", "full-references", "optimize-inference",
        "verbose"}) {
    if (result.count(flag)) cmd.push_back(std::string("--") + flag);
  }
  if (result.count("partitioner")) {
    cmd.insert(cmd.end(), {"--partitioner", result["partitioner"].as<std::string>()});
  }
  if (result.count("dynamic")) {
    // cxxopts splits vector values at commas: "x:0=batch[1,512]" arrives as "x:0=batch[1" and
    // "512]"; a piece without '=' continues the previous item.
    std::vector<std::string> items;
    for (const auto& d : result["dynamic"].as<std::vector<std::string>>()) {
      if (d.find('=') == std::string::npos && !items.empty()) items.back() += "," + d;
      else items.push_back(d);
    }
    for (const auto& d : items) cmd.insert(cmd.end(), {"--dynamic", d});
  }
  if (result.count("extra")) {
    for (const auto& e : result["extra"].as<std::vector<std::string>>()) cmd.push_back(e);
  }
  const std::string pythonpath = join(exporter_dirs(), ":");
  const int status = run_process(cmd, false, pythonpath);
  if (status == 127) throw UsageError("cannot run " + python);
  if (status != 0) {
    throw UsageError("the exporter failed (exit status " + std::to_string(status) +
                     ") — see its messages above; command: " + join(cmd, " "));
  }
  return kExitOk;
}

}  // namespace pt2rt::cli
