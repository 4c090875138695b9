// bench/measure.cpp — see measure.h.
#include "measure.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace pt2rt::bench {

namespace {

double now(Clock clock) {
  if (clock == Clock::Wall) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

std::vector<double> interleaved_min(const std::vector<std::function<void()>>& fns, int rounds,
                                    int warmup, Clock clock) {
  for (int r = 0; r < warmup; ++r) {
    for (const auto& fn : fns) fn();
  }
  std::vector<double> best(fns.size(), std::numeric_limits<double>::infinity());
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < fns.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(r)) % fns.size();  // rotated each round
      const double t0 = now(clock);
      fns[i]();
      best[i] = std::min(best[i], now(clock) - t0);
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
