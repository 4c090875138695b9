// export-cli — save · inspect · run · verify · train pt2rt archives (model.pt2).
//
//   export-cli <subcommand> [options]     export-cli <subcommand> --help
//
// Exit codes: 0 ok, 1 a check failed, 2 usage or input error (one line on stderr).
#include <c10/util/Exception.h>

#include <cstring>
#include <iostream>
#include <string>

#include "cli.h"
#include "options.h"
#include "pt2rt/errors.h"

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
    "\n"
    "exit codes: 0 ok, 1 a check failed, 2 usage or input error\n";

/// The first line of `text` (messages go to stderr as one line).
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

int fail(const std::string& command, const std::string& message) {
  std::cerr << "export-cli" << (command.empty() ? "" : " " + command) << ": error: " << message
            << std::endl;
  return pt2rt::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace pt2rt::cli;
  if (argc < 2) {
    std::cerr << kUsage;
    return kExitUsage;
  }
  const std::string command = argv[1];
  if (command == "-h" || command == "--help" || command == "help") {
    std::cout << kUsage;
    return kExitOk;
  }
  int (*handler)(int, char**) = nullptr;
  if (command == "save") handler = cmd_save;
  if (command == "inspect") handler = cmd_inspect;
  if (command == "run") handler = cmd_run;
  if (command == "verify") handler = cmd_verify;
  if (command == "train") handler = cmd_train;
  if (handler == nullptr) {
    return fail("", "unknown subcommand '" + command + "' (save, inspect, run, verify, train)");
  }
  try {
    return handler(argc - 1, argv + 1);
  } catch (const pt2rt::ExecutionError& e) {
    // Keep the context the runtime attached (arguments, export stack trace), not a C++ trace.
    return fail(command, e.what());
  } catch (const pt2rt::Error& e) {
    return fail(command, first_line(e.what()));
  } catch (const UsageError& e) {
    return fail(command, e.what());
  } catch (const cxxopts::exceptions::exception& e) {
    return fail(command, std::string(e.what()) + " (see --help)");
  } catch (const c10::Error& e) {
    return fail(command, first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return fail(command, first_line(e.what()));
  }
}
