// cli/cli.h — shared pieces of export-cli: subcommand entry points, exit codes, errors.
//
// Exit codes (every subcommand):
//   0  success
//   1  a check failed (verify: an output or gradient differs from its bundled reference)
//   2  usage or input error: bad option, missing/corrupt file, wrong input shape, ...;
//      main() prints one line "export-cli <cmd>: error: <message>" on stderr.
#pragma once

#include <c10/core/Device.h>

#include <stdexcept>
#include <string>

namespace pt2rt::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitUsage = 2;

/// A bad command line or input file the CLI detected itself (exit code 2).
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& what) : std::runtime_error(what) {}
};

/// Subcommands. `argc`/`argv` start at the subcommand's name (argv[0] == "run").
/// Each returns an exit code or throws (main() maps exceptions to exit code 2).
int cmd_save(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_verify(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_strip(int argc, char** argv);
int cmd_profile(int argc, char** argv);

/// Throws UsageError "<what> not found: <path>" unless `path` names a readable regular file.
void require_file(const std::string& path, const std::string& what);

/// Parses "cpu", "cuda", "cuda:1"; UsageError when malformed or CUDA is unavailable.
c10::Device parse_device(const std::string& text);

}  // namespace pt2rt::cli
