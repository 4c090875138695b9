// tests/cpp/runtime/cross_expectations.cpp — see cross_expectations.h.
#include "cross_expectations.h"

#include <algorithm>

namespace pt2rt::test {
namespace {

struct Expectation {
  const char* model;
  int exported_major;
  int running_major;
  std::vector<std::string> missing;
};

// No gap is left on the test models. (torch 2.x dropped PReLU's `prelu_backward` and the
// `.vec` overloads of the upsample backwards that torch 1.13 traces to; the 1.13 capture writes
// them in ops both versions have: decompositions._prelu_backward_portable,
// graph_passes.upsample_backward_without_vec. torch 2.x's `_prelu_kernel_backward` is written
// as `where` and `mul` by the lane-2 capture.)
// (Attention from torch 2.x crosses: the exporter captures it on its math path, with
// `_safe_softmax` written in ops LibTorch 1.13 has — exporter/README.md "Portable archives".)
const std::vector<Expectation>& table() {
  static const std::vector<Expectation> t = {};
  return t;
}

int major_of(const std::string& version) { return std::stoi(version.substr(0, version.find('.'))); }

}  // namespace

std::vector<std::string> expected_missing(const std::string& model,
                                          const std::string& exported_torch,
                                          const std::string& running_torch) {
  const int exported = major_of(exported_torch), running = major_of(running_torch);
  for (const Expectation& e : table()) {
    if (model == e.model && exported == e.exported_major && running == e.running_major) {
      std::vector<std::string> m = e.missing;
      std::sort(m.begin(), m.end());
      return m;
    }
  }
  return {};
}

}  // namespace pt2rt::test
