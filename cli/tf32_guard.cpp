// cli/tf32_guard.cpp — see tf32_guard.h.
#include "tf32_guard.h"

#include <ATen/Context.h>

namespace pt2rt::cli {

Tf32Guard::Tf32Guard(bool allow)
    : cudnn_(at::globalContext().allowTF32CuDNN()), cublas_(at::globalContext().allowTF32CuBLAS()) {
  at::globalContext().setAllowTF32CuDNN(allow);
  at::globalContext().setAllowTF32CuBLAS(allow);
}

Tf32Guard::~Tf32Guard() {
  at::globalContext().setAllowTF32CuDNN(cudnn_);
  at::globalContext().setAllowTF32CuBLAS(cublas_);
}

bool Tf32Guard::enabled() {
  return at::globalContext().allowTF32CuDNN() || at::globalContext().allowTF32CuBLAS();
}

}  // namespace pt2rt::cli
