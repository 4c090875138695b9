// cli/progress.cpp — progress bar / plain progress lines for `export-cli train`.
#include "progress.h"

#include "terminal.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace pt2rt::cli {

Progress::Progress(int epoch, int epochs, int64_t total_samples, double plain_interval_s)
    : epoch_(epoch),
      epochs_(epochs),
      total_(total_samples),
      plain_interval_s_(plain_interval_s),
      tty_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

std::string duration_string(double seconds) {
  const auto total = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  std::ostringstream out;
  out << std::setfill('0');
  if (total >= 3600) out << total / 3600 << ":" << std::setw(2) << total / 60 % 60;
  else out << total / 60;
  out << ":" << std::setw(2) << total % 60;
  return out.str();
}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string Progress::line(int64_t done, double running_loss) const {
  constexpr int kWidth = 24;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
  const double secs = elapsed_s();
  std::ostringstream out;
  out << "epoch " << epoch_ << "/" << epochs_ << " [" << std::string(filled, '#')
      << std::string(kWidth - filled, '.') << "] " << done << "/" << total_ << "  loss "
      << std::fixed << std::setprecision(4) << running_loss << "  " << std::setprecision(0)
      << (secs > 0 ? done / secs : 0.0) << " samples/s";
  if (done > 0 && secs > 0) {
    // the rest of this epoch and the epochs after it at this epoch's rate
    const double left = static_cast<double>(total_ - done) +
                        static_cast<double>(epochs_ - epoch_) * static_cast<double>(total_);
    out << "  eta " << duration_string(left * secs / static_cast<double>(done));
  }
  return out.str();
}

void Progress::update(int64_t done, double running_loss) {
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (tty_) {
    if (since < 0.05 && done < total_) return;
    write_control(std::cerr, "\r\033[K");
    std::cerr << line(done, running_loss) << std::flush;
  } else {
    if (since < plain_interval_s_) return;
    std::cout << line(done, running_loss) << std::endl;
  }
  last_print_ = now;
}

void Progress::finish() {
  if (tty_) write_control(std::cerr, "\r\033[K");
}

}  // namespace pt2rt::cli
