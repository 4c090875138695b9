// cli/verify_threads.cpp — see verify_threads.h.
#include "verify_threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <thread>

namespace pt2rt::cli {

std::optional<int> reference_threads(const Program& program) {
  auto it = program.metadata.find("reference_threads");
  if (it == program.metadata.end()) return std::nullopt;
  const std::string& s = it->second;
  if (s.empty() || s.size() > 4 || !std::all_of(s.begin(), s.end(), [](char c) {
        return c >= '0' && c <= '9';
      })) {
    return std::nullopt;
  }
  const int n = std::stoi(s);
  if (n < 1 || n > 4096) return std::nullopt;
  return n;
}

std::optional<ThreadChoice> verify_threads(const Program& program, c10::Device device,
                                           std::optional<int> requested) {
  if (requested) return ThreadChoice{*requested, "--threads"};
  const std::optional<int> recorded = reference_threads(program);
  if (!recorded || !device.is_cpu() || program.producer.capture_device != "cpu") {
    return std::nullopt;
  }
  const int machine = std::max(static_cast<int>(std::thread::hardware_concurrency()),
                               at::get_num_threads());
  if (*recorded > machine) {
    return ThreadChoice{machine, "the references were computed with " +
                                     std::to_string(*recorded) + ", this machine has " +
                                     std::to_string(machine) +
                                     " (results may differ by the kernels' choice)"};
  }
  return ThreadChoice{*recorded, "the exporter's, metadata reference_threads"};
}

IntraOpThreadsGuard::IntraOpThreadsGuard(int threads) : previous_(at::get_num_threads()) {
  at::set_num_threads(threads);
}

IntraOpThreadsGuard::~IntraOpThreadsGuard() { at::set_num_threads(previous_); }

}  // namespace pt2rt::cli
