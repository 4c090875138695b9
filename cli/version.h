// cli/version.h — `export-cli --version`.
#pragma once

#include <ostream>

namespace pt2rt::cli {

/// Prints "export-cli (pt2rt) <version>" and, one per line, the archive format and schema
/// version this build reads and writes and the LibTorch it runs on, e.g.
///   export-cli (pt2rt) 0.1.0
///   archive format pt2rt 1, schema 1.2
///   LibTorch 1.13.0
/// The pt2rt version is CMake's PROJECT_VERSION; `python -m pt2rt --version` prints the
/// exporter's (exporter/pt2rt/version.py), and a test checks the two agree.
void print_version(std::ostream& out);

}  // namespace pt2rt::cli
