// distributed/nccl_backend.h — c10d::ProcessGroupNCCL for ProcessGroup::join, in a translation
// unit of its own: nccl_backend.cpp where LibTorch has CUDA and nccl.h was found (it needs
// USE_C10D_NCCL and NCCL's header), nccl_backend_unavailable.cpp elsewhere.
#pragma once

#include <c10/core/Device.h>

#include <chrono>

#include "c10d_compat.h"

namespace pt2rt::distributed {

/// Whether make_nccl_backend can make one (this build has c10d's NCCL backend).
bool nccl_built();

/// A ProcessGroupNCCL of `size` ranks over `store`, bound to `device` (this rank's GPU) and
/// connected there eagerly, as torch.distributed.init_process_group(device_id=...) does; every
/// collective times out after `timeout`.
/// @throws c10::Error from c10d (e.g. two ranks on one GPU); std::runtime_error where
///   !nccl_built().
c10::intrusive_ptr<compat::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                      int rank, int size,
                                                      std::chrono::milliseconds timeout,
                                                      c10::Device device);

}  // namespace pt2rt::distributed
