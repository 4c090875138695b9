// cli/verify_threads.h — the intra-op thread count `export-cli verify` runs with.
//
// ATen's CPU kernels pick their algorithm, and so their rounding, by the intra-op thread count
// (at::get_num_threads(), torch.get_num_threads() in Python): at::native::select_conv_backend's
// oneDNN rule for 1x1 kernels reads it, oneDNN chooses its primitives' implementation and
// work split by it, and parallel reductions sum in another order. The differences are not
// always at float32's rounding: on torch 2.14 (Debian sid; a 2-core AVX-512 VM) eager
// PyTorch's gradients of squeezenet1_1 at 64x64 differ between 1 and 2 threads by 1.3e-3
// relative below its last 3x3 convolutions (1 thread: 2e-7 from float64), and
// efficientnet_v2_s's by up to 5x in the last stage, whose BatchNorms at 1x1 spatial size
// amplify it. The bundled references hold for the count they were computed with, which
// pt2rt.export records (metadata "reference_threads", schema/README.md "Metadata"); verify
// runs with it, as it turns TF32 off for references computed without TF32 (tf32_guard.h).
#pragma once

#include <c10/core/Device.h>

#include <optional>
#include <string>

#include "pt2rt/program.h"

namespace pt2rt::cli {

/// The archive's metadata "reference_threads": the intra-op thread count of the exporter's
/// eager references. nullopt when absent (archives before it), or not an integer in
/// [1, 4096] (an archive is untrusted input: such a value is ignored, not obeyed).
std::optional<int> reference_threads(const Program& program);

/// What verify sets: `threads` and a line saying why, for its output.
struct ThreadChoice {
  int threads = 0;
  std::string why;
};

/// The count to verify with. `requested` (--threads, >= 1) wins. Otherwise the archive's
/// reference_threads when the references were computed on the CPU
/// (Producer::capture_device) and `device` is the CPU, at most this machine's
/// std::thread::hardware_concurrency() (or the current count, if larger): an archive cannot
/// make verify start thousands of threads. nullopt: keep the process's count (CUDA, another
/// device, no recorded count).
std::optional<ThreadChoice> verify_threads(const Program& program, c10::Device device,
                                           std::optional<int> requested);

/// at::set_num_threads(n) for a scope; the previous count is put back on exit.
class IntraOpThreadsGuard {
 public:
  explicit IntraOpThreadsGuard(int threads);
  ~IntraOpThreadsGuard();
  IntraOpThreadsGuard(const IntraOpThreadsGuard&) = delete;
  IntraOpThreadsGuard& operator=(const IntraOpThreadsGuard&) = delete;

 private:
  int previous_;
};

}  // namespace pt2rt::cli
