// cli/train_resume.cpp — train's stored settings and --resume (train_resume.h).
#include "train_resume.h"

#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "pt2rt/errors.h"

namespace pt2rt::cli {

std::string setting_text(const cxxopts::ParseResult& result, const std::string& name) {
  if (name == "lr" || name == "momentum" || name == "weight-decay" || name == "lr-gamma" ||
      name == "lr-min") {
    std::ostringstream out;
    out << std::setprecision(17) << result[name].as<double>();
    return out.str();
  }
  if (name == "batch-size" || name == "grad-accumulation") {
    return std::to_string(result[name].as<int64_t>());
  }
  if (name == "lr-step-size") return std::to_string(result[name].as<unsigned>());
  if (name == "seed") return std::to_string(result[name].as<uint64_t>());
  return result[name].as<std::string>();
}

void add_resume_options(cxxopts::Options& options) {
  // clang-format off
  options.add_options()
      ("resume", "continue the training run stored in <model.pt2> (saved by train --save): "
                 "optimizer state, epoch, LR schedule, shuffle and dropout generators; options "
                 "not given take the stored values, given ones must equal them");
  // clang-format on
}

TrainOptions::TrainOptions(const cxxopts::ParseResult& result, const Model& model,
                           const std::string& path)
    : result_(result) {
  if (!result.count("resume")) return;
  resumed_ = load_training_state(model);
  if (!resumed_) {
    throw UsageError("--resume: " + path + " holds no training state (save one with train --save)");
  }
  for (const char* name : kSettingOptions) {
    if (!result.count(name)) continue;
    const std::string given = setting_text(result, name);
    const std::string* stored = resumed_->setting(name);
    if (stored == nullptr || *stored != given) {
      throw UsageError(std::string("--resume: --") + name + " " + given + " differs from the " +
                       (stored ? "stored " + *stored : std::string("stored run (not set)")) +
                       " (leave it out to continue with the stored value)");
    }
  }
}

bool TrainOptions::count(const std::string& name) const {
  return result_.count(name) > 0 || (resumed_ && resumed_->setting(name) != nullptr);
}

std::string TrainOptions::text(const std::string& name) const {
  if (result_.count(name) == 0 && resumed_) {
    if (const std::string* stored = resumed_->setting(name)) return *stored;
  }
  return setting_text(result_, name);
}

double TrainOptions::real(const std::string& name) const {
  const std::string t = text(name);
  try {
    return std::stod(t);
  } catch (const std::exception&) {
    throw UsageError("--resume: stored --" + name + " '" + t + "' is not a number");
  }
}

int64_t TrainOptions::integer(const std::string& name) const {
  const std::string t = text(name);
  try {
    return std::stoll(t);
  } catch (const std::exception&) {
    throw UsageError("--resume: stored --" + name + " '" + t + "' is not an integer");
  }
}

void TrainOptions::set(const std::string& name, const std::string& value) {
  for (auto& [k, v] : effective_) {
    if (k == name) {
      v = value;
      return;
    }
  }
  effective_.emplace_back(name, value);
}

void TrainOptions::restore(const Model& model, torch::optim::Optimizer& optimizer,
                           torch::optim::LRScheduler* scheduler, at::Generator& shuffle) const {
  if (!resumed_) return;
  const TrainingState& s = *resumed_;
  if (scheduler != nullptr) {
    for (int64_t e = 0; e < s.epochs; ++e) scheduler->step();  // as the stored run did
  }
  const at::Tensor shuffle_state = s.generator("shuffle");
  if (!shuffle_state.defined())
    throw UsageError("--resume: the training state has no shuffle generator");
  try {
    restore_optimizer_state(s, model, optimizer);
    restore_default_generators(s);
    set_generator_state(shuffle, shuffle_state, "shuffle");
  } catch (const InputError& e) {
    throw UsageError(std::string("--resume: ") + e.what());
  }
  std::cout << "resuming after epoch " << s.epochs << " (" << s.steps
            << " optimizer steps): " << summarize(s) << "\n";
}

void TrainOptions::save(const Model& model, const torch::optim::Optimizer& optimizer,
                        c10::Device device, const at::Generator& shuffle, int64_t epochs,
                        int64_t steps, const std::string& path) const {
  TrainingState state = capture_optimizer_state(model, optimizer);
  state.epochs = epochs_done() + epochs;
  state.steps = steps_done() + steps;
  for (const char* name : kSettingOptions) {
    auto it = std::find_if(effective_.begin(), effective_.end(),
                           [&](const auto& kv) { return kv.first == name; });
    if (it != effective_.end()) {
      state.settings.emplace_back(name, it->second);
    } else if (count(name)) {
      state.settings.emplace_back(name, text(name));
    }
  }
  add_default_generators(state, device);
  state.generators.emplace_back("shuffle", generator_state(shuffle));
  save_training_state(model, state, path);
}

}  // namespace pt2rt::cli
