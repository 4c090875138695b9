// cli/lr_schedule.h — learning-rate schedules of `export-cli train --lr-schedule`, stepped
// once per epoch (after the epoch's last optimizer step), as PyTorch's schedulers are used:
//
//   step    torch::optim::StepLR(optimizer, step_size, gamma): the LR of epoch e (0-based) is
//           lr · gamma^floor(e / step_size) — torch.optim.lr_scheduler.StepLR.
//   cosine  CosineAnnealingLR below: lr_e = eta_min + (lr − eta_min) · (1 + cos(π · e / T_max)) / 2
//           with T_max = the run's epochs — the closed form of
//           torch.optim.lr_scheduler.CosineAnnealingLR (SGDR, Loshchilov & Hutter 2017,
//           https://arxiv.org/abs/1608.03983, without restarts;
//           https://pytorch.org/docs/stable/generated/torch.optim.lr_scheduler.CosineAnnealingLR.html).
//
// Both start at epoch 0 with the optimizer's LR: like PyTorch's scheduler constructors, which
// take one initial step, make_lr_schedule() calls step() once before returning.
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>

#include <memory>
#include <string>

namespace pt2rt::cli {

/// torch.optim.lr_scheduler.CosineAnnealingLR for LibTorch (which lacks it), per param group.
class CosineAnnealingLR : public torch::optim::LRScheduler {
 public:
  /// `t_max` >= 1 epochs to anneal over; `eta_min` the final LR.
  CosineAnnealingLR(torch::optim::Optimizer& optimizer, unsigned t_max, double eta_min);

 private:
  std::vector<double> get_lrs() override;
  std::vector<double> base_lrs_;
  unsigned t_max_;
  double eta_min_;
};

struct LrScheduleOptions {
  std::string kind = "none";  ///< none | step | cosine
  unsigned step_size = 1;     ///< step: epochs between decays
  double gamma = 0.1;         ///< step: decay factor
  double eta_min = 0.0;       ///< cosine: the LR reached after t_max epochs
  unsigned t_max = 1;         ///< cosine: epochs to anneal over
};

/// The scheduler for `options` on `optimizer` (which must outlive it), nullptr for "none".
/// @throws UsageError for an unknown kind or a bad parameter.
std::unique_ptr<torch::optim::LRScheduler> make_lr_schedule(torch::optim::Optimizer& optimizer,
                                                            const LrScheduleOptions& options);

/// The LR of the optimizer's first param group (what the epoch lines print).
double current_lr(const torch::optim::Optimizer& optimizer);

}  // namespace pt2rt::cli
