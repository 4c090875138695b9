// bench/counting_allocator.cpp — see counting_allocator.h.
#include "counting_allocator.h"

#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace pt2rt::bench {

namespace {

/// Live allocations: data pointer → (bytes, the wrapped allocator's DataPtr). The returned
/// DataPtr has context == data (Allocator::raw_allocate asserts it), so the size is looked
/// up here when it is freed.
struct Registry {
  std::mutex mutex;
  std::unordered_map<void*, std::pair<size_t, c10::DataPtr>> live;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: tensors may outlive main()
  return *r;
}

c10::Allocator* g_previous = nullptr;
CountingAllocator* g_counting = nullptr;

}  // namespace

CountingAllocator& CountingAllocator::install() {
  if (!g_counting) {
    g_previous = c10::GetCPUAllocator();
    g_counting = new CountingAllocator(g_previous);  // lives until exit: tensors refer to it
  }
  c10::SetCPUAllocator(g_counting, /*priority=*/0);
  return *g_counting;
}

void CountingAllocator::uninstall() {
  if (g_previous) c10::SetCPUAllocator(g_previous, /*priority=*/0);
}

c10::DataPtr CountingAllocator::allocate(size_t n) const {
  c10::DataPtr inner = base_->allocate(n);
  void* data = inner.get();
  if (!data) return inner;  // zero bytes
  const c10::Device device = inner.device();
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.live[data] = {n, std::move(inner)};
  }
  const int64_t now = live_.fetch_add(static_cast<int64_t>(n)) + static_cast<int64_t>(n);
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  return c10::DataPtr(data, data, &CountingAllocator::free_counted, device);
}

c10::DataPtr CountingAllocator::allocate(size_t n) {
  return static_cast<const CountingAllocator*>(this)->allocate(n);
}

void CountingAllocator::copy_data(void* dst, const void* src, std::size_t n) const {
  if (n) std::memcpy(dst, src, n);
}

void CountingAllocator::free_counted(void* data) {
  std::pair<size_t, c10::DataPtr> entry;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.live.find(data);
    if (it == r.live.end()) return;
    entry = std::move(it->second);
    r.live.erase(it);
  }
  g_counting->live_.fetch_sub(static_cast<int64_t>(entry.first));
  // entry.second (the wrapped allocator's DataPtr) frees the memory here
}

int64_t peak_above_start(CountingAllocator& alloc, const std::function<void()>& fn) {
  alloc.reset_peak();
  const int64_t start = alloc.live_bytes();
  fn();
  return alloc.peak_bytes() - start;
}

}  // namespace pt2rt::bench
