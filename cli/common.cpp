// cli/common.cpp — argument checks shared by the subcommands.
#include <ATen/Context.h>
#include <sys/stat.h>

#include "cli.h"

namespace pt2rt::cli {

void require_file(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw UsageError(what + " not found: " + path);
  if (!S_ISREG(st.st_mode)) throw UsageError(what + " is not a regular file: " + path);
}

c10::Device parse_device(const std::string& text) {
  c10::Device device(c10::kCPU);
  try {
    device = c10::Device(text);
  } catch (const c10::Error&) {
    throw UsageError("--device: expected cpu, cuda or cuda:<index>, got '" + text + "'");
  }
  if (device.is_cuda() && !at::globalContext().hasCUDA()) {
    throw UsageError("--device " + text +
                     ": CUDA is not available (this LibTorch was built without CUDA or no "
                     "GPU is visible)");
  }
  if (!device.is_cpu() && !device.is_cuda()) {
    throw UsageError("--device: only cpu and cuda are supported, got '" + text + "'");
  }
  return device;
}

}  // namespace pt2rt::cli
