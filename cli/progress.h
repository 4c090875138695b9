// cli/progress.h — training progress: a redrawn bar on a terminal, plain lines otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace pt2rt::cli {

/// "0:07", "12:30", "1:02:03" (hours only when needed); negative counts as 0.
std::string duration_string(double seconds);

/// Reports progress through one epoch. On a terminal (stderr is a tty) it redraws one line
/// `epoch 2/5 [#####.....] 640/1344  loss 0.2345  5230 samples/s  eta 0:07` (the ETA of
/// the whole run: the rest of this epoch and the later ones at this epoch's rate); otherwise
/// it prints such a line to stdout at most every `plain_interval_s` seconds (and never for short epochs).
class Progress {
 public:
  Progress(int epoch, int epochs, int64_t total_samples, double plain_interval_s = 10.0);
  /// After each batch: samples done so far this epoch and the running mean loss.
  void update(int64_t samples_done, double running_loss);
  /// Clears the bar (terminal) before the epoch summary line is printed.
  void finish();
  double elapsed_s() const;

 private:
  std::string line(int64_t samples_done, double running_loss) const;
  int epoch_, epochs_;
  int64_t total_;
  double plain_interval_s_;
  bool tty_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

}  // namespace pt2rt::cli
