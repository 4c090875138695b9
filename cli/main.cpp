// export-cli — save · inspect · run · verify · train · strip · profile pt2rt archives (model.pt2).
//
//   export-cli <subcommand> [options] [--verbose]     export-cli <subcommand> --help
//
// Exit codes: 0 ok, 1 a check failed, 2 usage or input error (one line on stderr; with
// --verbose the whole message: an ExecutionError's arguments and export stack trace, every
// refused or missing operator). All output is filtered by terminal.h: archive text cannot
// reach the terminal as control sequences.
#include <c10/util/Exception.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "options.h"
#include "pt2rt/errors.h"
#include "terminal.h"
#include "version.h"

namespace {

constexpr const char* kUsage =
    "export-cli — export, inspect, run, verify and fine-tune pt2rt archives (model.pt2)\n"
    "\n"
    "usage: export-cli <subcommand> [options]    (export-cli <subcommand> --help)\n"
    "\n"
    "subcommands:\n"
    "  save     <file.py|module>:<callable> <out.pt2>   export a PyTorch model (runs Python)\n"
    "  inspect  <model.pt2> [--json] [--graph ROLE]      versions, signature, graphs, weights\n"
    "  run      <model.pt2> [--inputs in.pt] ...         run inference or a training step\n"
    "  verify   <model.pt2>                              check against bundled references\n"
    "  train    <model.pt2> --data train.pt ...          fine-tune in C++ and save\n"
    "  strip    <model.pt2> <out.pt2> --inference-only   a deployment copy (no training graphs)\n"
    "  profile  <model.pt2> [--train] [--iters N]        time per operator (--json)\n"
    "\n"
    "errors are one line on stderr; --verbose (any subcommand) prints them in full\n"
    "export-cli --version: pt2rt, archive format, schema and LibTorch versions\n"
    "exit codes: 0 ok, 1 a check failed, 2 usage or input error\n";

bool verbose = false;

int fail(const std::string& command, const std::string& message) {
  // One string, one write: the ranks of `train --nproc-per-node` share this stderr.
  std::cerr << "export-cli" + (command.empty() ? "" : " " + command) + ": error: " +
                   (verbose ? message : pt2rt::cli::one_line(message)) + "\n"
            << std::flush;
  return pt2rt::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pt2rt::cli;
  const TerminalSafeText safe_output;
  // --verbose may follow any subcommand; it is taken out before the subcommand parses.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--verbose") == 0) verbose = true;
    else argv[kept++] = argv[i];
  }
  argc = kept;
  if (argc < 2) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  if (command == "--version" || command == "version") {
    print_version(std::cout);
    return kExitOk;
  }
  int (*handler)(int, char**) = nullptr;
  if (command == "save") handler = cmd_save;
  if (command == "inspect") handler = cmd_inspect;
  if (command == "run") handler = cmd_run;
  if (command == "verify") handler = cmd_verify;
  if (command == "train") handler = cmd_train;
  if (command == "strip") handler = cmd_strip;
  if (command == "profile") handler = cmd_profile;
  if (handler == nullptr) {
    return fail("", "unknown subcommand '" + command + "' (save, inspect, run, verify, train, strip, profile)");
  }
  // `save` hands --verbose on to the Python exporter (its traceback on failure).
  std::vector<char*> args(argv + 1, argv + argc);
  static char verbose_flag[] = "--verbose";
  if (verbose && command == "save") args.push_back(verbose_flag);
  try {
    return handler(static_cast<int>(args.size()), args.data());
  } catch (const pt2rt::Error& e) {
    // ExecutionError's context (arguments, export stack trace) shows with --verbose.
    return fail(command, e.what());
  } catch (const UsageError& e) {
    return fail(command, e.what());
  } catch (const cxxopts::exceptions::exception& e) {
    return fail(command, std::string(e.what()) + " (see --help)");
  } catch (const c10::Error& e) {
    return fail(command, e.what_without_backtrace());
  } catch (const std::exception& e) {
    return fail(command, e.what());
  }
}
