// cli/train_resume.h — `export-cli train --resume`: the options a run stores with its training
// state (pt2rt/training_state.h) and how a resumed run takes them back.
//
// Saving (--save): the weights plus the optimizer state (torch::optim SGD/Adam), the completed
// epochs and optimizer steps, the run's settings (kSettingOptions below, as given or defaulted)
// and the states of the shuffle generator and of the default generators the graphs' random ops
// draw from. Resuming (--resume) happens at an epoch boundary: the next epoch's shuffle and
// dropout masks continue from the stored generator states, the LR schedule is stepped to the
// stored epoch, and the optimizer state is restored — the same losses and weights as one
// uninterrupted run with the epochs added up (except --lr-schedule cosine, whose T_max stays
// the first run's --epochs).
//
// Override rule: with --resume an option of kSettingOptions that is not given takes the stored
// value; one that is given must equal it, else a one-line UsageError names both values.
#pragma once

#include <ATen/core/Generator.h>

#include <cxxopts.hpp>
#include <optional>
#include <string>

#include "pt2rt/model.h"
#include "pt2rt/training_state.h"

namespace torch::optim {
class Optimizer;
class LRScheduler;
}  // namespace torch::optim

namespace pt2rt::cli {

/// The options a training state stores and a resumed run checks.
inline const char* const kSettingOptions[] = {
    "optimizer", "lr",         "momentum",          "weight-decay", "loss",
    "output",    "batch-size", "grad-accumulation", "lr-schedule",  "lr-step-size",
    "lr-gamma",  "lr-min",     "lr-t-max",          "seed"};

/// Adds --resume to train's options.
void add_resume_options(cxxopts::Options& options);

/// Train's option values: the command line's, or with --resume the stored ones where not given.
class TrainOptions {
 public:
  /// Loads the training state of `model` when --resume was given.
  /// @throws UsageError when --resume is given and the archive has no training state, or a
  ///   given option differs from the stored value; FormatError for a damaged state.
  TrainOptions(const cxxopts::ParseResult& result, const Model& model, const std::string& path);

  /// Given or stored.
  bool count(const std::string& name) const;
  std::string text(const std::string& name) const;
  double real(const std::string& name) const;
  int64_t integer(const std::string& name) const;

  /// The resumed state, or null.
  const TrainingState* resumed() const { return resumed_ ? &*resumed_ : nullptr; }
  /// Completed epochs and optimizer steps before this run (0 without --resume).
  int64_t epochs_done() const { return resumed_ ? resumed_->epochs : 0; }
  int64_t steps_done() const { return resumed_ ? resumed_->steps : 0; }

  /// Records an effective value (e.g. the batch size taken from the archive, the schedule's
  /// T_max) to store under `name`.
  void set(const std::string& name, const std::string& value);

  /// Resumed run: steps `scheduler` (may be null) to the stored epoch, restores the optimizer
  /// state, the default generators and `shuffle`. Prints one "resuming ..." line.
  /// @throws UsageError (one line) when the optimizer or its hyper-parameters differ.
  void restore(const Model& model, torch::optim::Optimizer& optimizer,
               torch::optim::LRScheduler* scheduler, at::Generator& shuffle) const;

  /// Saves the weights with the training state after `epochs` more epochs and `steps` more
  /// optimizer steps (save_training_state, atomic).
  void save(const Model& model, const torch::optim::Optimizer& optimizer, c10::Device device,
            const at::Generator& shuffle, int64_t epochs, int64_t steps,
            const std::string& path) const;

 private:
  const cxxopts::ParseResult& result_;
  std::optional<TrainingState> resumed_;
  std::vector<std::pair<std::string, std::string>> effective_;
};

/// Canonical text of an option value as stored (doubles with 17 significant digits).
std::string setting_text(const cxxopts::ParseResult& result, const std::string& name);

}  // namespace pt2rt::cli
