// runtime/core/allocation_cap.h — a bound on the CPU memory one kernel call may
// allocate.
//
// Most nodes are verified on the meta device at load (meta_check.h), so their results'
// sizes are known before they run. A node whose op has no Meta kernel is not: its kernel
// could allocate whatever its inputs and arguments make it compute, and the declared result
// sizes are only checked after it returned. Such calls run under an AllocationCap: pt2rt
// wraps LibTorch's CPU allocator (c10::SetCPUAllocator, once, at the first Model::load) in
// one that, while a cap is active on the calling thread, refuses — with a c10::Error, as an
// out-of-memory would — an allocation that would take the call's total past the cap. The
// wrapper forwards everything else, and costs one thread-local read per allocation when no
// cap is active. Allocations made on other threads (intra-op workers' scratch) and on CUDA
// are not counted.
#pragma once

#include <cstdint>

namespace pt2rt {

/// Installs the capping CPU allocator if it is not installed yet (thread-safe, idempotent).
void install_allocation_cap();

/// While alive, CPU allocations on this thread may total at most `bytes`. Not nestable.
class AllocationCap {
 public:
  explicit AllocationCap(uint64_t bytes);
  ~AllocationCap();
  AllocationCap(const AllocationCap&) = delete;
  AllocationCap& operator=(const AllocationCap&) = delete;
};

}  // namespace pt2rt
