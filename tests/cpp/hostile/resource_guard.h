// tests/cpp/hostile/resource_guard.h — memory and CPU-time guards for the hostile-input tests.
//
// A finding like "4 GB allocated from a 502-byte file" does not fail by itself on a machine
// with spare memory: the test has to make the allocation fail. AddressSpaceLimit lowers
// RLIMIT_AS to what the process maps now plus a margin, so an unbounded allocation throws
// std::bad_alloc (a test failure) instead of quietly succeeding. It is a no-op under
// AddressSanitizer, whose shadow memory needs the whole address space.
#pragma once

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>

namespace pt2rt::test {

#if defined(__SANITIZE_ADDRESS__)
#define PT2RT_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PT2RT_TEST_ASAN 1
#endif
#endif

class AddressSpaceLimit {
 public:
  explicit AddressSpaceLimit(uint64_t margin_bytes) {
#ifndef PT2RT_TEST_ASAN
    std::ifstream statm("/proc/self/statm");
    uint64_t pages = 0;
    statm >> pages;
    active_ = statm && ::getrlimit(RLIMIT_AS, &saved_) == 0;
    if (!active_) return;
    rlimit lim = saved_;
    lim.rlim_cur = pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) + margin_bytes;
    if (saved_.rlim_cur != RLIM_INFINITY && lim.rlim_cur > saved_.rlim_cur) lim.rlim_cur = saved_.rlim_cur;
    active_ = ::setrlimit(RLIMIT_AS, &lim) == 0;
#else
    (void)margin_bytes;
#endif
  }
  ~AddressSpaceLimit() {
    if (active_) ::setrlimit(RLIMIT_AS, &saved_);
  }
  AddressSpaceLimit(const AddressSpaceLimit&) = delete;
  AddressSpaceLimit& operator=(const AddressSpaceLimit&) = delete;

 private:
  rlimit saved_{};
  bool active_ = false;
};

/// CPU seconds this thread has used (CLOCK_THREAD_CPUTIME_ID): a complexity guard that other
/// processes sharing the machine do not disturb.
inline double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace pt2rt::test
