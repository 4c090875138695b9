// runtime/core/allocation_cap.cpp — see allocation_cap.h.
#include "core/allocation_cap.h"

#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <mutex>

#include "core/libtorch_compat.h"
#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

struct Budget {
  bool active = false;
  uint64_t cap = 0;
  uint64_t used = 0;
};
thread_local Budget budget;

class CappingAllocator final : public ForwardingAllocator {
 public:
  using ForwardingAllocator::ForwardingAllocator;

 protected:
  void before_allocate(size_t n) const override {
    if (!budget.active) return;
    TORCH_CHECK(n <= budget.cap - budget.used, "pt2rt: this kernel call may allocate at most ",
                budget.cap, " bytes (its declared results and inputs allow no more), "
                "but asks for ", n, " more after ", budget.used);
    budget.used += n;
  }
};

}  // namespace

void install_allocation_cap() {
  static std::once_flag once;
  std::call_once(once, [] {
    static CappingAllocator allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/0);
    if (c10::GetCPUAllocator() != &allocator) {
      throw Error("pt2rt: cannot install its CPU allocator (another one was registered with a "
                  "higher priority), so kernels without a Meta kernel could not be bounded");
    }
  });
}

AllocationCap::AllocationCap(uint64_t bytes) { budget = Budget{true, bytes, 0}; }
AllocationCap::~AllocationCap() { budget = Budget{}; }

}  // namespace pt2rt
