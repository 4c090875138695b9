// bench/counting_allocator.h — a CPU allocator that counts live and peak bytes, for
// pt2rt_bench's memory figures and the runtime tests' memory-behaviour checks.
//
// CountingAllocator wraps the CPU allocator LibTorch had (c10::GetCPUAllocator) and is
// installed with c10::SetCPUAllocator, so every CPU tensor allocated in this process while
// it is installed — by pt2rt, TorchScript, or eager PyTorch in an embedded interpreter (the
// same libc10) — is counted: bytes live now and the peak since the last reset_peak().
// Tensors allocated before install() are not counted, neither when allocated nor when freed.
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace pt2rt::bench {

/// A c10::Allocator that forwards to another one and counts live and peak bytes.
/// Thread-safe. The override set works with LibTorch 1.13 (`allocate` const) and 2.x
/// (`allocate` non-const, `copy_data` pure virtual): both spellings are declared.
class CountingAllocator final : public c10::Allocator {
 public:
  /// Installs a counting allocator in front of the current CPU allocator (process-wide).
  static CountingAllocator& install();
  /// Puts the allocator that was current before install() back. Memory allocated while
  /// installed is still counted when freed.
  static void uninstall();

  c10::DataPtr allocate(size_t n) const;
  c10::DataPtr allocate(size_t n);
  c10::DeleterFnPtr raw_deleter() const override { return &free_counted; }
  void copy_data(void* dst, const void* src, std::size_t n) const;

  int64_t live_bytes() const { return live_.load(); }
  int64_t peak_bytes() const { return peak_.load(); }
  /// Peak := bytes live now.
  void reset_peak() { peak_.store(live_.load()); }

 private:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}
  static void free_counted(void* data);
  c10::Allocator* base_;
  mutable std::atomic<int64_t> live_{0};
  mutable std::atomic<int64_t> peak_{0};
};

/// Peak bytes above the live bytes at the start of `fn` (counting allocator installed).
int64_t peak_above_start(CountingAllocator& alloc, const std::function<void()>& fn);

}  // namespace pt2rt::bench
