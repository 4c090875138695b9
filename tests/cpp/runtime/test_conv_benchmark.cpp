// ConvBenchmark (runtime/conv_benchmark.h): the bounds that keep an archive's declared sizes
// from costing load time or memory out of proportion (what is not timed), the MAC count, and
// that a decision is made once per case.
#include <ATen/Parallel.h>
#include "catch_compat.h"

#include <chrono>

#include "conv_benchmark.h"

using namespace pt2rt;

namespace {

Conv2dCase small_case() {
  // resnet18's 3x3 64->64 convolution at batch 1 on an 8x8 image
  return Conv2dCase{{1, 64, 8, 8}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
}

}  // namespace

TEST_CASE("conv benchmark: multiply-adds of consistent sizes, -1 for the rest", "[conv_benchmark]") {
  CHECK(ConvBenchmark::macs(small_case()) == int64_t{1} * 64 * 8 * 8 * 64 * 3 * 3);
  Conv2dCase strided = small_case();
  strided.stride = {2, 2};  // 4x4 output
  CHECK(ConvBenchmark::macs(strided) == int64_t{1} * 64 * 4 * 4 * 64 * 3 * 3);
  Conv2dCase depthwise{{2, 32, 5, 5}, {32, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 32, false};
  CHECK(ConvBenchmark::macs(depthwise) == int64_t{2} * 32 * 3 * 3 * 1 * 3 * 3);

  Conv2dCase c = small_case();
  c.input[1] = 63;  // channels do not match the weight
  CHECK(ConvBenchmark::macs(c) == -1);
  c = small_case();
  c.groups = 3;  // 64 output channels not divisible
  CHECK(ConvBenchmark::macs(c) == -1);
  c = small_case();
  c.padding = {0, 0};
  c.input = {1, 64, 2, 2};  // kernel larger than the image: no output
  CHECK(ConvBenchmark::macs(c) == -1);
  c = small_case();
  c.dilation = {int64_t{1} << 40, 1};  // overflow attempts
  CHECK(ConvBenchmark::macs(c) == -1);
  c = small_case();
  c.input = {int64_t{1} << 62, 64, 8, 8};
  CHECK(ConvBenchmark::macs(c) == -1);
  c = small_case();
  c.input = {1, 64, 4096, 4096};  // 2^30 elements: above kMaxElements
  CHECK(ConvBenchmark::macs(c) == -1);
  c = small_case();
  c.stride = {0, 1};
  CHECK(ConvBenchmark::macs(c) == -1);
  c = small_case();
  c.groups = 0;
  CHECK(ConvBenchmark::macs(c) == -1);
  c = small_case();
  c.weight = {64, 64, 3};
  CHECK(ConvBenchmark::macs(c) == -1);
}

TEST_CASE("conv benchmark: what is not timed answers ATen's choice at once", "[conv_benchmark]") {
  const auto start = std::chrono::steady_clock::now();
  ConvBenchmark bench;
  // 2^27 output elements x 576 MACs each: far above kMaxMacs; memory would be 0.5 GiB each
  CHECK_FALSE(bench.onednn_faster(Conv2dCase{{1, 64, 2048, 1024}, {64, 64, 3, 3}, {1, 1},
                                             {1, 1}, {1, 1}, 1, false}));
  CHECK_FALSE(bench.onednn_faster(Conv2dCase{{1, 63, 8, 8}, {64, 64, 3, 3}, {1, 1}, {1, 1},
                                             {1, 1}, 1, false}));  // inconsistent
  ConvBenchmark spent(/*mac_budget=*/0);
  CHECK_FALSE(spent.onednn_faster(small_case()));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("conv benchmark: a case is decided once", "[conv_benchmark]") {
  // A budget for exactly one timing of small_case: the second question must come from memory
  // (a second timing would not fit the budget and would answer false).
  const int64_t one_timing = ConvBenchmark::macs(small_case()) * 2 * (ConvBenchmark::kRepeats + 1);
  for (int threads : {1, 2}) {
    const int before = at::get_num_threads();
    at::set_num_threads(threads);
    ConvBenchmark bench(one_timing);
    const bool first = bench.onednn_faster(small_case());
    CHECK(bench.onednn_faster(small_case()) == first);
    Conv2dCase other = small_case();
    other.bias = false;
    CHECK_FALSE(bench.onednn_faster(other));  // the budget is spent
    at::set_num_threads(before);
  }
}
