// distributed/heartbeat.cpp — see heartbeat.h.
#include "heartbeat.h"

#include <exception>

namespace pt2rt::distributed {
namespace {

std::string heartbeat_key(int rank) { return "pt2rt/heartbeat/" + std::to_string(rank); }
std::string failed_key(int rank) { return "pt2rt/failed/" + std::to_string(rank); }

}  // namespace

Heartbeat::Heartbeat(c10d::Store& store, int rank, int world_size,
                     std::chrono::milliseconds interval)
    : store_(store), rank_(rank), world_size_(world_size), interval_(interval) {
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  thread_.join();
}

void Heartbeat::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    lock.unlock();
    try {
      store_.add(heartbeat_key(rank_), 1);
    } catch (const std::exception&) {
      return;  // the store is gone (rank 0 exited): nothing left to tell
    }
    lock.lock();
    stop_cv_.wait_for(lock, interval_, [this] { return stop_; });
  }
}

std::vector<int64_t> Heartbeat::counters() {
  std::vector<int64_t> out;
  for (int r = 0; r < world_size_; ++r) out.push_back(store_.add(heartbeat_key(r), 0));
  return out;
}

std::string Heartbeat::lost_ranks(bool tcp) {
  std::vector<int> lost;
  try {
    store_.set(failed_key(rank_), std::vector<uint8_t>{1});
    const std::vector<int64_t> before = counters();
    std::this_thread::sleep_for(interval_ * 5 / 2);
    const std::vector<int64_t> after = counters();
    for (int r = 0; r < world_size_; ++r) {
      if (r != rank_ && after[r] == before[r] && !store_.check({failed_key(r)})) {
        lost.push_back(r);
      }
    }
  } catch (const std::exception&) {
    return tcp && rank_ != 0 ? "rank 0 (its TCPStore does not answer)" : "";
  }
  std::string out;
  for (int r : lost) out += (out.empty() ? "" : ", ") + std::to_string(r);
  if (lost.empty()) return "";
  return (lost.size() == 1 ? "rank " : "ranks ") + out;
}

}  // namespace pt2rt::distributed
