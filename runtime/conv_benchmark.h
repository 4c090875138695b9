// runtime/conv_benchmark.h — times a CPU float32 2-D convolution at its declared sizes both
// ways, ATen's own algorithm against oneDNN on a packed weight, for LoadOptions::conv_benchmark
// (conv_prepack.h).
//
// ATen picks a CPU convolution's algorithm by rule (`at::native::select_conv_backend`): on one
// intra-op thread an unstrided, undilated convolution below batch 16 runs im2col + GEMM
// (`thnn_conv2d`), whose speed is the BLAS's. With Debian's default `libblas3` (the reference
// BLAS) that is 10-13x slower than oneDNN for resnet18 / mobilenet_v2 at batch 1; with
// OpenBLAS it is close, and faster for some layers (a 3-channel stem). No rule knows which
// BLAS is loaded, so the choice is measured, as `torch.backends.cudnn.benchmark` measures
// cuDNN's algorithms: on tensors of the declared sizes filled with a constant (nonzero: the
// reference BLAS skips zero elements), one warm-up call each, then the minimum of a few.
//
// Bounded, since the sizes come from an archive: a convolution with a tensor above
// kMaxElements elements or above kMaxMacs multiply-adds is not timed (ATen's choice stays),
// a benchmark times at most its MAC budget in all, and equal cases (same sizes and
// parameters) are timed once per ConvBenchmark.
#pragma once

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace pt2rt {

/// A float32 2-D convolution at static sizes: input [N, C, H, W], weight [O, C/groups, kH,
/// kW]; stride / padding / dilation of 2 ints; transposed = false, output_padding 0.
struct Conv2dCase {
  std::vector<int64_t> input, weight, stride, padding, dilation;
  int64_t groups = 1;
  bool bias = false;

  bool operator<(const Conv2dCase& o) const {
    return std::tie(input, weight, stride, padding, dilation, groups, bias) <
           std::tie(o.input, o.weight, o.stride, o.padding, o.dilation, o.groups, o.bias);
  }
};

/// Decides, per Conv2dCase, whether oneDNN on a packed weight (`at::mkldnn_convolution`) beats
/// ATen's own algorithm (`at::convolution`) at the current intra-op thread count. Not
/// thread-safe; one per plan build.
class ConvBenchmark {
 public:
  static constexpr int64_t kMaxElements = int64_t{1} << 24;  ///< per tensor (64 MiB float32)
  static constexpr int64_t kMaxMacs = int64_t{1} << 28;      ///< per convolution call
  static constexpr int64_t kDefaultBudget = int64_t{1} << 33;  ///< MACs timed in all
  static constexpr int kRepeats = 3;  ///< timed calls per algorithm, after one warm-up call

  explicit ConvBenchmark(int64_t mac_budget = kDefaultBudget) : macs_left_(mac_budget) {}

  /// True when oneDNN's call took under 95 % of ATen's (near parity ATen's choice, and its
  /// bits, stay). False without timing for a case outside the bounds above, one the budget
  /// no longer covers, or one ATen or oneDNN refuses (a c10::Error while timing). Never
  /// throws c10::Error.
  bool onednn_faster(const Conv2dCase& c);

  /// Multiply-adds of one call of `c`, or -1 when the sizes are inconsistent (an output dim
  /// below 1, channels not divisible by groups, a tensor above kMaxElements elements).
  static int64_t macs(const Conv2dCase& c);

 private:
  std::map<Conv2dCase, bool> decided_;
  int64_t macs_left_;
};

}  // namespace pt2rt
