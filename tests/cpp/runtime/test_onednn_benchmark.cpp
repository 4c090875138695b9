// OneDnnBenchmark (runtime/plan/onednn_benchmark.h): the bounds that keep an archive's declared
// sizes from costing load time or memory out of proportion (what is not timed), the MAC
// counts, and that a decision is made once per case.
#include <ATen/Parallel.h>
#include "catch_compat.h"

#include "fixtures.h"
#include "plan/onednn_benchmark.h"

using namespace pt2rt;

namespace {

Conv2dCase small_conv() {
  // resnet18's 3x3 64->64 convolution at batch 1 on an 8x8 image
  return Conv2dCase{{1, 64, 8, 8}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
}

}  // namespace

TEST_CASE("onednn benchmark: convolution multiply-adds of consistent sizes, -1 for the rest",
          "[onednn_benchmark]") {
  CHECK(OneDnnBenchmark::conv_macs(small_conv()) == int64_t{1} * 64 * 8 * 8 * 64 * 3 * 3);
  Conv2dCase strided = small_conv();
  strided.stride = {2, 2};  // 4x4 output
  CHECK(OneDnnBenchmark::conv_macs(strided) == int64_t{1} * 64 * 4 * 4 * 64 * 3 * 3);
  Conv2dCase depthwise{{2, 32, 5, 5}, {32, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 32, false};
  CHECK(OneDnnBenchmark::conv_macs(depthwise) == int64_t{2} * 32 * 3 * 3 * 1 * 3 * 3);

  Conv2dCase c = small_conv();
  c.input[1] = 63;  // channels do not match the weight
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
  c = small_conv();
  c.groups = 3;  // 64 output channels not divisible
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
  c = small_conv();
  c.padding = {0, 0};
  c.input = {1, 64, 2, 2};  // kernel larger than the image: no output
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
  c = small_conv();
  c.dilation = {int64_t{1} << 40, 1};  // overflow attempts
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
  c = small_conv();
  c.input = {int64_t{1} << 62, 64, 8, 8};
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
  c = small_conv();
  c.input = {1, 64, 4096, 4096};  // 2^30 elements: above kMaxElements
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
  c = small_conv();
  c.stride = {0, 1};
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
  c = small_conv();
  c.groups = 0;
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
  c = small_conv();
  c.weight = {64, 64, 3};
  CHECK(OneDnnBenchmark::conv_macs(c) == -1);
}

TEST_CASE("onednn benchmark: linear multiply-adds, -1 for sizes out of bounds", "[onednn_benchmark]") {
  CHECK(OneDnnBenchmark::linear_macs({32, 256, 512, true}) == int64_t{32} * 256 * 512);
  CHECK(OneDnnBenchmark::linear_macs({0, 256, 512, true}) == -1);
  CHECK(OneDnnBenchmark::linear_macs({32, -1, 512, false}) == -1);
  CHECK(OneDnnBenchmark::linear_macs({int64_t{1} << 13, int64_t{1} << 12, 8, false}) == -1);  // x: 2^25
  CHECK(OneDnnBenchmark::linear_macs({8, 8, int64_t{1} << 40, false}) == -1);
}

TEST_CASE("onednn benchmark: what is out of bounds answers ATen's kernel without timing", "[onednn_benchmark]") {
  OneDnnBenchmark bench;
  // 2^27 output elements x 576 MACs each: far above kMaxMacs; memory would be 0.5 GiB each
  CHECK_FALSE(bench.conv_faster(Conv2dCase{{1, 64, 2048, 1024}, {64, 64, 3, 3}, {1, 1},
                                           {1, 1}, {1, 1}, 1, false}));
  CHECK_FALSE(bench.conv_faster(Conv2dCase{{1, 63, 8, 8}, {64, 64, 3, 3}, {1, 1}, {1, 1},
                                           {1, 1}, 1, false}));  // inconsistent
  CHECK_FALSE(bench.linear_faster({4096, 4096, 4096, true}));   // 2^36 MACs
  CHECK(bench.macs_left() == OneDnnBudget{}.macs);  // none of them was timed
  OneDnnBenchmark spent(OneDnnBudget{0});
  CHECK_FALSE(spent.conv_faster(small_conv()));
  CHECK_FALSE(spent.linear_faster({32, 256, 512, true}));
  OneDnnBudget small_bytes;
  small_bytes.case_bytes = 4 * 64 * 8 * 8;  // below small_conv's tensors
  OneDnnBenchmark tight(small_bytes);
  CHECK_FALSE(tight.conv_faster(small_conv()));
  CHECK_FALSE(tight.linear_faster({32, 256, 512, true}));
  CHECK(tight.macs_left() == small_bytes.macs);
}

TEST_CASE("onednn benchmark: a case is decided once", "[onednn_benchmark]") {
  // A budget for exactly one timing: the second question must come from memory (a second
  // timing would not fit the budget and would answer false; where oneDNN lost the first
  // timing both answers are false either way).
  const int64_t one_conv =
      OneDnnBenchmark::conv_macs(small_conv()) * 2 * (OneDnnBenchmark::kRepeats + 1);
  const LinearCase linear{32, 256, 512, true};
  const int64_t one_linear =
      OneDnnBenchmark::linear_macs(linear) * 2 * (OneDnnBenchmark::kRepeats + 1);
  for (int threads : {1, 2}) {
    const test::ScopedThreads scope(threads);
    OneDnnBenchmark conv_bench(OneDnnBudget{one_conv});
    const bool first = conv_bench.conv_faster(small_conv());
    CHECK(conv_bench.macs_left() == 0);  // timed once, the budget spent
    CHECK(conv_bench.conv_faster(small_conv()) == first);
    Conv2dCase other = small_conv();
    other.bias = false;
    CHECK_FALSE(conv_bench.conv_faster(other));  // the budget is spent

    OneDnnBenchmark linear_bench(OneDnnBudget{one_linear});
    const bool first_linear = linear_bench.linear_faster(linear);
    CHECK(linear_bench.macs_left() == 0);
    CHECK(linear_bench.linear_faster(linear) == first_linear);
    CHECK_FALSE(linear_bench.linear_faster({32, 256, 512, false}));
  }
}
