// distributed/heartbeat.h — names the rank a failed collective lost: every rank bumps a
// counter key in the job's c10d store (TCPStore/FileStore) from a background thread; when a
// collective fails, the ranks whose counters stop moving are the dead or hung ones (a
// SIGSTOPped or killed process stops its thread too). Gloo's own errors name a socket, not
// a rank, so with more than two ranks they cannot say which peer was lost.
//
// Keys: pt2rt/heartbeat/<rank> (a counter, Store::add) and pt2rt/failed/<rank> (set by a rank
// that is alive but saw a collective fail: it is not named as lost by the others).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "c10d_compat.h"

namespace pt2rt::distributed {

class Heartbeat {
 public:
  /// Starts the thread: bumps this rank's counter every `interval`. Store errors (the store
  /// gone) stop the thread quietly. `store` must outlive the Heartbeat.
  Heartbeat(c10d::Store& store, int rank, int world_size, std::chrono::milliseconds interval);
  /// Stops and joins the thread.
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  /// After a failed collective: marks this rank as a survivor, watches every counter for
  /// 2.5 intervals and returns "rank 2", "ranks 1, 3" (stalled counters of ranks that did not
  /// mark themselves survivors), "rank 0 (its TCPStore does not answer)" when the store cannot
  /// be read (`tcp`, this rank not 0), or "" when it cannot tell. Never throws.
  std::string lost_ranks(bool tcp);

 private:
  void run();
  std::vector<int64_t> counters();

  c10d::Store& store_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds interval_;
  std::mutex mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace pt2rt::distributed
