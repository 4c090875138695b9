// cli/version.cpp — `export-cli --version` (see version.h).
#include "version.h"

#include <torch/version.h>

#include "pt2rt/constants.h"

namespace pt2rt::cli {

void print_version(std::ostream& out) {
  out << "export-cli (pt2rt) " << PT2RT_VERSION << "\n"
      << "archive format " << kArchiveFormat << " " << kArchiveVersion << ", schema "
      << kSchemaMajor << "." << kSchemaMinor << "\n"
      << "LibTorch " << TORCH_VERSION_MAJOR << "." << TORCH_VERSION_MINOR << "."
      << TORCH_VERSION_PATCH << "\n";
}

}  // namespace pt2rt::cli
