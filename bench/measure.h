// bench/measure.h — how pt2rt_bench measures: interleaved minimum times and minor page
// faults (peak memory: counting_allocator.h).
//
// Times: every contender runs once per round, rounds repeat (after warm-up rounds), and the
// minimum per contender is kept — a busy machine slows all contenders of a round alike, and
// the minimum is the least disturbed run (the convention of timeit / torch.utils.benchmark's
// blocked_autorange minimum). The order rotates by one each round, so every contender runs
// equally often after every other: a call is slower right after another framework's (on the
// digits CNN's 190 µs inference, the contender after eager PyTorch's Python loses ~15 µs), and
// a fixed order showed up in the ratios (fold ÷ frozen TorchScript 1.03 in one fixed order,
// 0.92 in the reverse order, 1.01 rotated). Two clocks: wall time (steady_clock) and the calling thread's
// CPU time (CLOCK_THREAD_CPUTIME_ID, user + system). With one intra-op thread every
// contender does all its work on the calling thread (LibTorch's autograd engine runs CPU
// nodes on the thread that called backward()), so thread CPU time is the work itself, and
// other processes on a shared machine do not inflate it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pt2rt::bench {

enum class Clock { Wall, ThreadCpu };

/// Minimum seconds per call of each function on `clock`: `warmup` rounds, then `rounds`
/// rounds, each running every function once, round r starting at function r mod n.
std::vector<double> interleaved_min(const std::vector<std::function<void()>>& fns, int rounds,
                                    int warmup, Clock clock = Clock::Wall);

/// Minor page faults of this process so far (getrusage ru_minflt).
int64_t minor_page_faults();

}  // namespace pt2rt::bench
