// tests/cpp/hostile/test_mapped_load.cpp — a memory-mapped load (LoadOptions::map_weights)
// checks an archive exactly as a read load does: every hostile reproducer, and every truncation
// of a valid archive, gives the same outcome (the same error type and message, or success)
// through Model::load with and without mapping.
#include <ATen/ATen.h>

#include <optional>
#include <string>

// After the LibTorch headers: c10's logging defines a CHECK macro that Catch's must replace.
#include "catch_compat.h"
#include "fixture.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"
#include "reproducers.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

/// "ok", or the type and message of what Model::load threw.
std::string load_outcome(const std::string& path, bool map) {
  LoadOptions options;
  options.map_weights = map;
  try {
    Model m = Model::load(path, c10::kCPU, options);
    return "ok";
  } catch (const OpResolutionError& e) {
    return std::string("OpResolutionError: ") + e.what();
  } catch (const FormatError& e) {
    return std::string("FormatError: ") + e.what();
  } catch (const Error& e) {
    return std::string("Error: ") + e.what();
  }
}

}  // namespace

TEST_CASE("hostile: a mapped load refuses every reproducer archive as a read load does",
          "[hostile][loader][mapped]") {
  TempDir dir;
  int archives = 0;
  for (const auto& [name, bytes] : all_reproducers()) {
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".pt2") != 0) continue;
    const std::string path = dir.file(name);
    write_file(path, bytes);
    INFO(name);
    const std::string read = load_outcome(path, false);
    CHECK(load_outcome(path, true) == read);
    ++archives;
  }
  CHECK(archives >= 10);
}

TEST_CASE("hostile: every truncation of a valid archive is refused alike mapped or read",
          "[hostile][loader][mapped]") {
  TempDir dir;
  const Bytes whole = fixture_archive();
  const std::string path = dir.file("cut.pt2");
  // Cuts inside every part of the file: local headers, entry data, the central directory and
  // the end record (a truncated archive must never map pages past the end of the file).
  for (size_t keep = 0; keep < whole.size(); keep += (keep < 64 || whole.size() - keep < 128) ? 1 : 61) {
    write_file(path, Bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(keep)));
    INFO("first " << keep << " of " << whole.size() << " bytes");
    const std::string read = load_outcome(path, false);
    CHECK(read != "ok");
    CHECK(load_outcome(path, true) == read);
  }
  write_file(path, whole);
  CHECK(load_outcome(path, true) == "ok");
}
