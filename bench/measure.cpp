// bench/measure.cpp — see measure.h.
#include "measure.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace pt2rt::bench {

std::vector<double> interleaved_min(const std::vector<std::function<void()>>& fns, int rounds,
                                    int warmup) {
  using Clock = std::chrono::steady_clock;
  for (int r = 0; r < warmup; ++r) {
    for (const auto& fn : fns) fn();
  }
  std::vector<double> best(fns.size(), std::numeric_limits<double>::infinity());
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < fns.size(); ++i) {
      const auto t0 = Clock::now();
      fns[i]();
      best[i] = std::min(best[i], std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  return best;
}

int64_t minor_page_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

}  // namespace pt2rt::bench
