// cli/lr_schedule.cpp — StepLR / CosineAnnealingLR for `export-cli train`.
#include "lr_schedule.h"

#include <torch/optim/schedulers/step_lr.h>

#include <cmath>

#include "cli.h"

namespace pt2rt::cli {

CosineAnnealingLR::CosineAnnealingLR(torch::optim::Optimizer& optimizer, unsigned t_max,
                                     double eta_min)
    : torch::optim::LRScheduler(optimizer),
      base_lrs_(get_current_lrs()),
      t_max_(t_max),
      eta_min_(eta_min) {}

std::vector<double> CosineAnnealingLR::get_lrs() {
  // step_count_ is the epoch whose LR this step sets (0 on the constructor-like first step).
  const double pi = std::acos(-1.0);
  const double factor = (1.0 + std::cos(pi * step_count_ / t_max_)) / 2.0;
  std::vector<double> lrs;
  for (double base : base_lrs_) lrs.push_back(eta_min_ + (base - eta_min_) * factor);
  return lrs;
}

std::unique_ptr<torch::optim::LRScheduler> make_lr_schedule(torch::optim::Optimizer& optimizer,
                                                            const LrScheduleOptions& options) {
  std::unique_ptr<torch::optim::LRScheduler> scheduler;
  if (options.kind == "none") return scheduler;
  if (options.kind == "step") {
    if (options.step_size == 0) throw UsageError("--lr-step-size must be >= 1");
    if (!(options.gamma > 0)) throw UsageError("--lr-gamma must be > 0");
    scheduler =
        std::make_unique<torch::optim::StepLR>(optimizer, options.step_size, options.gamma);
  } else if (options.kind == "cosine") {
    if (!(options.eta_min >= 0)) throw UsageError("--lr-min must be >= 0");
    scheduler = std::make_unique<CosineAnnealingLR>(optimizer, std::max(1u, options.t_max),
                                                    options.eta_min);
  } else {
    throw UsageError("--lr-schedule must be none, step or cosine, got '" + options.kind + "'");
  }
  scheduler->step();  // epoch 0, as PyTorch's constructors do (LibTorch's leave it to the caller)
  return scheduler;
}

double current_lr(const torch::optim::Optimizer& optimizer) {
  return optimizer.param_groups().at(0).options().get_lr();
}

}  // namespace pt2rt::cli
