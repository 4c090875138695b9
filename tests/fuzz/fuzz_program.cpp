// fuzz_program — libFuzzer target: program.fb bytes -> decode + validate -> the save path.
//
// Input: the bytes of a program.fb (seeds: the programs of exported archives and of the
// hostile reproducers). Each input goes through decode_program (Verifier, bounded conversion,
// semantic pass) and, when that accepts it, through drop_example_references (Model::save's
// UnPack / Pack rewrite), whose output must decode again. Any error other than pt2rt::Error,
// any sanitizer report, crash, timeout or excess memory is a finding.
#include <cstdint>
#include <cstdlib>
#include <cstdio>

#include "pt2rt/archive_writer.h"
#include "pt2rt/errors.h"
#include "pt2rt/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    pt2rt::decode_program(data, size);
  } catch (const pt2rt::Error&) {
    return 0;
  }
  std::vector<uint8_t> rewritten;
  try {
    rewritten = pt2rt::drop_example_references(data, size);
  } catch (const pt2rt::Error&) {
    return 0;  // e.g. a minor version this build cannot repack
  }
  try {
    pt2rt::decode_program(rewritten.data(), rewritten.size());
  } catch (const pt2rt::Error& e) {
    std::fprintf(stderr, "the save path made an invalid program: %s\n", e.what());
    std::abort();
  }
  return 0;
}
