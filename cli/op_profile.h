// cli/op_profile.h — per-operator timing of pt2rt calls through LibTorch's RecordFunction
// observers (ATen/record_function.h: the hooks torch.profiler is built on), for
// `export-cli profile`.
//
// While an OpProfile is alive, a global RecordFunction callback (scope FUNCTION: operators
// called through the c10::Dispatcher) times every *outermost* operator call on each thread —
// the ops the plan's nodes call; ops those call internally count inside their caller
// (autograd's evaluate_function ranges are not rows: the backward graph's ops inside are). pt2rt's
// own prim::/sym:: nodes and the interpreter's bookkeeping run outside the dispatcher: they
// are the gap between the rows' sum and the measured call. Times are wall-clock (steady_clock)
// in microseconds; on CUDA they measure the launch, not the kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pt2rt::cli {

struct OpRow {
  std::string op;  ///< "aten::addmm", "aten::add.Tensor"
  int64_t calls = 0;
  double total_us = 0.0;
};

/// Installs the callback on construction, removes it on destruction. One at a time.
class OpProfile {
 public:
  OpProfile();
  ~OpProfile();
  OpProfile(const OpProfile&) = delete;
  OpProfile& operator=(const OpProfile&) = delete;
  /// Rows recorded so far, by total time (largest first).
  std::vector<OpRow> rows() const;
  /// Forgets what was recorded (after warm-up calls).
  void reset();

 private:
  uint64_t handle_;
};

}  // namespace pt2rt::cli
