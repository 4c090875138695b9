// distributed/nccl_backend.cpp — nccl_backend.h where LibTorch has CUDA and NCCL (built with
// USE_C10D_NCCL: distributed/CMakeLists.txt).
#include "nccl_backend.h"

#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace pt2rt::distributed {

bool nccl_built() { return true; }

c10::intrusive_ptr<compat::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                      int rank, int size,
                                                      std::chrono::milliseconds timeout,
                                                      c10::Device device) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  group->setBoundDeviceId(device);
  group->eagerConnectSingleDevice(device);
  return group;
}

}  // namespace pt2rt::distributed
