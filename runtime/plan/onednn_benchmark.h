// runtime/plan/onednn_benchmark.h — times a CPU float32 convolution or linear
// layer at its declared sizes both ways, ATen's own kernel against oneDNN on a packed weight, for
// LoadOptions::onednn_benchmark (conv_prepack.h, linear_prepack.h).
//
// ATen picks a CPU convolution's algorithm by rule (`at::native::select_conv_backend`): on one
// intra-op thread an unstrided, undilated convolution below batch 16 runs im2col + GEMM
// (`thnn_conv2d`); a linear layer (`addmm`, `mm`) always calls the BLAS. Their speed is the
// BLAS's: with Debian's default `libblas3` (the reference BLAS) oneDNN is 10-13x faster for
// resnet18 / mobilenet_v2 at batch 1 and up to 16x for a 32x256 by 256x512 linear layer;
// with OpenBLAS it is close, and some layers (a 3-channel stem, matrix-vector products) are
// faster in ATen. No rule knows which BLAS is loaded, so the choice is measured, as
// `torch.backends.cudnn.benchmark` measures cuDNN's algorithms: on tensors of the declared
// sizes filled with a constant (nonzero: the reference BLAS skips zero elements), one warm-up
// call each, then the fastest of kRepeats; oneDNN is chosen when it takes under 95 % of
// ATen's time (near parity ATen's kernel, and its bits, stay). The oneDNN call timed is the
// one the plan would make, conversions of the input and output included.
//
// Bounded, since the sizes come from an archive: a case with a tensor above kMaxElements
// elements, a call above kMaxMacs multiply-adds or tensors above the budget's bytes is not
// timed (ATen's kernel stays), a benchmark times at most its budget's multiply-adds in all
// (one benchmark per plan build), and equal cases (same sizes and parameters) are timed once.
// Model::load sets the budget from the archive's run bounds (pt2rt/load_options.h RunLimits:
// at most twice max_work multiply-adds, tensors of at most max_bytes per case), so timing a
// small archive costs no more than running it a few times could.
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

/// A float32 linear layer at static sizes: input [rows, in] times the transposed weight
/// [out, in], plus a bias [out] when `bias` (`addmm(bias, input, weight.t())` / `mm`).
struct LinearCase {
  int64_t rows = 0, in = 0, out = 0;
  bool bias = false;

  bool operator<(const LinearCase& o) const {
    return std::tie(rows, in, out, bias) < std::tie(o.rows, o.in, o.out, o.bias);
  }
};

/// What one OneDnnBenchmark may spend.
struct OneDnnBudget {
  int64_t macs = int64_t{1} << 33;          ///< multiply-adds timed in all (both kernels)
  uint64_t case_bytes = uint64_t{1} << 28;  ///< bytes of the tensors made for one case
};

/// Decides per case whether oneDNN on a packed weight beats ATen's kernel at the current
/// intra-op thread count. Not thread-safe; one per plan build.
class OneDnnBenchmark {
 public:
  static constexpr int64_t kMaxElements = int64_t{1} << 24;  ///< per tensor (64 MiB float32)
  static constexpr int64_t kMaxMacs = int64_t{1} << 28;      ///< per call
  static constexpr int kRepeats = 3;  ///< timed calls per kernel, after one warm-up call

  explicit OneDnnBenchmark(OneDnnBudget budget = {})
      : macs_left_(budget.macs), case_bytes_(budget.case_bytes) {}

  /// True when oneDNN (`at::mkldnn_convolution` on a weight packed by
  /// `at::mkldnn_reorder_conv2d_weight`) took under 95 % of `at::convolution`'s time. False
  /// without timing for a case outside the bounds above, one the budget no longer covers, or
  /// one ATen or oneDNN refuses (a c10::Error while timing). Never throws c10::Error.
  bool conv_faster(const Conv2dCase& c);
  /// The same for `at::mkldnn_linear` (input converted with `to_mkldnn`, output with
  /// `to_dense`, as linear_prepack.h runs it) against `at::addmm` / `at::mm`.
  bool linear_faster(const LinearCase& c);

  /// Multiply-adds of one call, or -1 when the sizes are inconsistent (an output dim below 1,
  /// channels not divisible by groups, a size below 1 or above kMaxElements elements).
  static int64_t conv_macs(const Conv2dCase& c);
  static int64_t linear_macs(const LinearCase& c);

  /// Multiply-adds the budget still affords (each timed case takes 2 x (kRepeats + 1) x its
  /// MACs).
  int64_t macs_left() const { return macs_left_; }

 private:
  /// Takes the cost of timing a case of `macs` multiply-adds on tensors of `bytes` from the
  /// budget; false (nothing taken) when the case is not to be timed.
  bool afford(int64_t macs, int64_t bytes);
  /// The memoised answer for `c`, else `race()` (seconds of ATen's and of oneDNN's call)
  /// when the budget affords `macs` on `bytes`, under NoGradGuard; a c10::Error answers false.
  template <typename Case, typename Race>
  bool decide(std::map<Case, bool>& decided, const Case& c, int64_t macs, int64_t bytes,
              Race&& race);

  std::map<Conv2dCase, bool> convs_;
  std::map<LinearCase, bool> linears_;
  int64_t macs_left_;
  uint64_t case_bytes_;
};

}  // namespace pt2rt
