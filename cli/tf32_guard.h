// cli/tf32_guard.h — TF32 on or off for CUDA convolutions (cuDNN) and matmuls (cuBLAS) for a
// scope, restored on exit: `export-cli verify` runs with TF32 off (its references are full
// float32) unless --allow-tf32. The switches are LibTorch's process-wide ones,
// at::Context::setAllowTF32CuDNN / setAllowTF32CuBLAS (torch.backends.cudnn.allow_tf32 and
// torch.backends.cuda.matmul.allow_tf32 in Python); they exist, and are read back, on
// CPU-only builds too, where they change nothing.
#pragma once

namespace pt2rt::cli {

class Tf32Guard {
 public:
  /// Sets both switches to `allow`.
  explicit Tf32Guard(bool allow);
  ~Tf32Guard();
  Tf32Guard(const Tf32Guard&) = delete;
  Tf32Guard& operator=(const Tf32Guard&) = delete;

  /// Whether either switch is on now (read from at::globalContext()).
  static bool enabled();

 private:
  bool cudnn_, cublas_;
};

}  // namespace pt2rt::cli
