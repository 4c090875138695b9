// runtime/model/training_state.cpp — TrainingState from and into torch::optim SGD / Adam, and the
// default generators' states (pt2rt/training_state.h). Archive I/O: training_state_io.cpp.
#include "pt2rt/training_state.h"

#include <ATen/Context.h>
#include <c10/core/GradMode.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <iomanip>
#include <mutex>
#include <sstream>

#include "core/optimizer_compat.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"

namespace pt2rt {
namespace {

using torch::optim::Adam;
using torch::optim::AdamOptions;
using torch::optim::AdamParamState;
using torch::optim::SGD;
using torch::optim::SGDOptions;
using torch::optim::SGDParamState;

/// Name and hyper-parameters of `optimizer` (its only param group), in TrainingState's order.
std::pair<std::string, std::vector<std::pair<std::string, double>>> describe_optimizer(
    const torch::optim::Optimizer& optimizer) {
  if (optimizer.param_groups().size() != 1) {
    throw InputError("training state: the optimizer has " +
                     std::to_string(optimizer.param_groups().size()) +
                     " param groups; pt2rt saves optimizers with one");
  }
  const torch::optim::OptimizerOptions& o = optimizer.param_groups()[0].options();
  if (dynamic_cast<const SGD*>(&optimizer) != nullptr) {
    const auto& s = static_cast<const SGDOptions&>(o);
    return {"sgd",
            {{"lr", s.lr()},
             {"momentum", s.momentum()},
             {"dampening", s.dampening()},
             {"weight_decay", s.weight_decay()},
             {"nesterov", s.nesterov() ? 1.0 : 0.0}}};
  }
  if (dynamic_cast<const Adam*>(&optimizer) != nullptr) {
    const auto& a = static_cast<const AdamOptions&>(o);
    return {"adam",
            {{"lr", a.lr()},
             {"beta1", std::get<0>(a.betas())},
             {"beta2", std::get<1>(a.betas())},
             {"eps", a.eps()},
             {"weight_decay", a.weight_decay()},
             {"amsgrad", a.amsgrad() ? 1.0 : 0.0}}};
  }
  throw InputError("training state: only torch::optim::SGD and Adam are supported");
}

std::string format_value(double v) {
  std::ostringstream out;
  out << std::setprecision(17) << v;
  return out.str();
}

/// FQN -> parameter for the trainable parameters of `model`.
std::vector<std::pair<std::string, at::Tensor>> trainable(const Model& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (auto& [name, p] : model.named_parameters()) {
    if (p.requires_grad()) out.emplace_back(name, p);
  }
  return out;
}

}  // namespace

const std::string* TrainingState::setting(const std::string& key) const {
  for (const auto& [k, v] : settings) {
    if (k == key) return &v;
  }
  return nullptr;
}

at::Tensor TrainingState::generator(const std::string& name) const {
  for (const auto& [k, v] : generators) {
    if (k == name) return v;
  }
  return {};
}

double TrainingState::hyper_parameter(const std::string& name) const {
  for (const auto& [k, v] : hyper_parameters) {
    if (k == name) return v;
  }
  throw InputError("training state: no hyper-parameter '" + name + "' for " + optimizer);
}

TrainingState capture_optimizer_state(const Model& model,
                                      const torch::optim::Optimizer& optimizer) {
  TrainingState state;
  std::tie(state.optimizer, state.hyper_parameters) = describe_optimizer(optimizer);
  const auto& stored = optimizer.state();
  size_t found = 0;
  for (const auto& [fqn, p] : trainable(model)) {
    const auto it = stored.find(optimizer_state_key(p));
    if (it == stored.end()) continue;
    ++found;
    OptimizerParamState ps;
    ps.param = fqn;
    if (state.optimizer == "sgd") {
      const auto& s = static_cast<const SGDParamState&>(*it->second);
      if (!s.momentum_buffer().defined()) continue;
      ps.tensors.emplace_back("momentum_buffer", s.momentum_buffer());
    } else {
      const auto& a = static_cast<const AdamParamState&>(*it->second);
      ps.step = a.step();
      ps.tensors.emplace_back("exp_avg", a.exp_avg());
      ps.tensors.emplace_back("exp_avg_sq", a.exp_avg_sq());
      if (a.max_exp_avg_sq().defined())
        ps.tensors.emplace_back("max_exp_avg_sq", a.max_exp_avg_sq());
    }
    state.params.push_back(std::move(ps));
  }
  if (found != stored.size()) {
    throw InputError("training state: the optimizer holds state for " +
                     std::to_string(stored.size() - found) +
                     " tensor(s) that are not trainable parameters of the model");
  }
  return state;
}

void restore_optimizer_state(const TrainingState& state, const Model& model,
                             torch::optim::Optimizer& optimizer) {
  const auto [name, hyper] = describe_optimizer(optimizer);
  if (name != state.optimizer) {
    throw InputError("training state: saved for " + state.optimizer + ", the optimizer is " + name);
  }
  for (const auto& [key, value] : hyper) {
    const double saved = state.hyper_parameter(key);
    if (saved != value) {
      throw InputError("training state: " + name + " " + key + " was " + format_value(saved) +
                       ", the optimizer has " + format_value(value));
    }
  }
  std::vector<void*> in_optimizer;
  for (const at::Tensor& p : optimizer.param_groups()[0].params()) {
    in_optimizer.push_back(p.unsafeGetTensorImpl());
  }
  const auto params = trainable(model);
  auto& target = optimizer.state();
  target.clear();
  c10::AutoGradMode no_grad(false);
  for (const OptimizerParamState& ps : state.params) {
    const at::Tensor* param = nullptr;
    for (const auto& [fqn, p] : params) {
      if (fqn == ps.param) param = &p;
    }
    if (param == nullptr || std::find(in_optimizer.begin(), in_optimizer.end(),
                                      param->unsafeGetTensorImpl()) == in_optimizer.end()) {
      throw InputError("training state: parameter '" + ps.param +
                       "' has saved state but is not a trainable parameter in the optimizer");
    }
    auto tensor = [&](const char* key) -> at::Tensor {
      for (const auto& [k, t] : ps.tensors) {
        if (k == key) return t.to(param->device(), /*non_blocking=*/false, /*copy=*/true);
      }
      return {};
    };
    if (name == "sgd") {
      auto s = std::make_unique<SGDParamState>();
      s->momentum_buffer(tensor("momentum_buffer"));
      target[optimizer_state_key(*param)] = std::move(s);
    } else {
      auto a = std::make_unique<AdamParamState>();
      a->step(ps.step);
      a->exp_avg(tensor("exp_avg"));
      a->exp_avg_sq(tensor("exp_avg_sq"));
      a->max_exp_avg_sq(tensor("max_exp_avg_sq"));
      target[optimizer_state_key(*param)] = std::move(a);
    }
  }
}

at::Tensor generator_state(const at::Generator& generator) {
  at::Generator gen = generator;  // a handle on the same generator (mutex() is non-const)
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_generator_state(at::Generator& gen, const at::Tensor& state, const std::string& name) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const c10::Error& e) {
    throw InputError("training state: generator '" + name +
                     "' refuses the saved state: " + e.what_without_backtrace());
  }
}

void add_default_generators(TrainingState& state, c10::Device device) {
  state.generators.emplace_back("cpu",
                                generator_state(at::globalContext().defaultGenerator(c10::kCPU)));
  if (device.is_cuda()) {
    const c10::Device d(c10::kCUDA, device.has_index() ? device.index() : 0);
    state.generators.emplace_back("cuda:" + std::to_string(d.index()),
                                  generator_state(at::globalContext().defaultGenerator(d)));
  }
}

void restore_default_generators(const TrainingState& state) {
  for (const auto& [name, bytes] : state.generators) {
    if (name != "cpu" && name.rfind("cuda:", 0) != 0) continue;  // the caller's own
    at::Generator gen;
    try {
      gen = at::globalContext().defaultGenerator(c10::Device(name));
    } catch (const c10::Error& e) {
      throw InputError("training state: no generator for '" + name +
                       "' here: " + e.what_without_backtrace());
    }
    set_generator_state(gen, bytes, name);
  }
}

std::string summarize(const TrainingState& state) {
  std::ostringstream out;
  out << state.optimizer << " (";
  for (size_t i = 0; i < state.hyper_parameters.size(); ++i) {
    out << (i ? ", " : "") << state.hyper_parameters[i].first << " "
        << state.hyper_parameters[i].second;
  }
  size_t tensors = 0;
  uint64_t bytes = 0;
  for (const auto& ps : state.params) {
    for (const auto& [k, t] : ps.tensors) {
      ++tensors;
      bytes += t.numel() * t.element_size();
    }
  }
  out << "), state for " << state.params.size() << " parameters (" << tensors << " tensors, "
      << bytes << " bytes), epochs " << state.epochs << ", steps " << state.steps;
  return out.str();
}

}  // namespace pt2rt
