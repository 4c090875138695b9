// fuzz_archive_load — libFuzzer target: archive bytes -> Model::load.
//
// Input: a whole model.pt2 (seeds: exported archives, the loader's fixture archive, the
// hostile reproducers). Model::load runs the zip checks, program decoding and validation,
// weight loading, the operator policy, plan building and the meta-device check of every
// graph. Anything but a pt2rt::Error (an uncaught exception terminates: a finding), any
// sanitizer report, crash, timeout or excess memory is a finding.
#include <cstdint>

#include "pt2rt/errors.h"
#include "pt2rt/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    pt2rt::Model::load(data, size);
  } catch (const pt2rt::Error&) {
  }
  return 0;
}
