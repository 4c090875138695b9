// distributed/nccl_backend_unavailable.cpp — nccl_backend.h for a LibTorch without CUDA, or
// where NCCL's header (nccl.h) was not found.
#include <stdexcept>

#include "nccl_backend.h"

namespace pt2rt::distributed {

bool nccl_built() { return false; }

c10::intrusive_ptr<compat::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&,
                                                      int, int, std::chrono::milliseconds,
                                                      c10::Device) {
  throw std::runtime_error("this pt2rt_distributed was built without NCCL");
}

}  // namespace pt2rt::distributed
