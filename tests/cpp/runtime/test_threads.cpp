// Concurrent inference on one Model: 8 threads × 50 calls give outputs identical to one
// thread's (the plans are immutable; per-call state lives in a frame).
#include <ATen/ATen.h>
#include "catch_compat.h"

#include <atomic>
#include <thread>

#include "fixtures.h"
#include "pt2rt/model.h"

using namespace pt2rt;
using namespace pt2rt::test;

TEST_CASE("8 threads x 50 inference calls on one Model match single-threaded outputs",
          "[threads]") {
  for (const std::string name : {"cnn_bn", "two_io", "resnet18"}) {
    INFO(name);
    const Model m = Model::load(archive_path(name, "default"));
    std::vector<at::Tensor> base = to_tensors(load_record(name + "_ref.pt").at("inputs"));
    // Different inputs per call index so that mixing up frames would show.
    auto inputs_for = [&](int call) {
      std::vector<at::Tensor> in;
      for (const at::Tensor& t : base) in.push_back(t * (1.0 + 0.01 * call));
      return in;
    };
    constexpr int kThreads = 8, kCalls = 50;
    std::vector<std::vector<at::Tensor>> expected;
    for (int c = 0; c < kCalls; ++c) expected.push_back(m.forward(inputs_for(c)));

    std::atomic<int> mismatches{0}, errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        try {
          for (int i = 0; i < kCalls; ++i) {
            int c = (i + t * 7) % kCalls;
            auto out = m.forward(inputs_for(c));
            for (size_t k = 0; k < out.size(); ++k) {
              if (!out[k].equal(expected[c][k])) ++mismatches;
            }
          }
        } catch (...) {
          ++errors;
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(errors == 0);
    CHECK(mismatches == 0);
  }
}
