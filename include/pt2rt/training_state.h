// pt2rt/training_state.h — resumable training: torch::optim state, progress and random
// generator states saved with the fine-tuned weights inside the archive, pickle-free (the
// ONNX Runtime training `CheckpointState` analogue; schema/README.md "Training state").
//
// Archive layout (schema 1.3): `optimizer/state.fb`, a FlatBuffer TrainingState (schema
// pt2rt.fbs, identifier "PT2T") holding the optimizer's name and hyper-parameters, per
// parameter FQN its step and state tensor records, progress counters, the trainer's settings
// and generator states; each state tensor is the zip entry `optimizer/<n>` (raw little-endian
// contiguous bytes of the parameter's dtype and sizes, 64-byte aligned like weights/<n>).
//
// What is captured is what torch::optim keeps per parameter (the state names of
// torch/optim/sgd.h and adam.h, as torch::optim::serialize writes them):
//   SGD  (SGDOptions lr, momentum, dampening, weight_decay, nesterov): `momentum_buffer`, only
//        once a step with momentum != 0 created it;
//   Adam (AdamOptions lr, betas, eps, weight_decay, amsgrad): `step` (int64), `exp_avg`,
//        `exp_avg_sq`, and `max_exp_avg_sq` when amsgrad.
// Other optimizers, and optimizers with more than one param group, are refused (InputError).
//
// Exact resume: restoring the state into an optimizer built with the same options over the same
// parameters, the weights of the saved archive (Model::load) and the generator states
// (restore_default_generators) makes the next steps compute what an uninterrupted run computes.
//
// A loaded state is untrusted input and checked as the weights are (load_training_state).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace pt2rt {

class Archive;
class Model;
struct Program;

/// The state of one parameter.
struct OptimizerParamState {
  std::string param;  ///< FQN (Model::named_parameters), a parameter with requires_grad
  int64_t step = 0;   ///< Adam: AdamParamState::step; SGD: 0
  /// State name -> tensor of the parameter's dtype and sizes, on the CPU after
  /// load_training_state, on the parameter's device after capture_optimizer_state.
  std::vector<std::pair<std::string, at::Tensor>> tensors;
};

struct TrainingState {
  std::string optimizer;  ///< "sgd" or "adam"
  /// The optimizer's options in this order — sgd: lr, momentum, dampening, weight_decay,
  /// nesterov (0/1); adam: lr, beta1, beta2, eps, weight_decay, amsgrad (0/1). `lr` is the
  /// param group's current LR (after any schedule steps).
  std::vector<std::pair<std::string, double>> hyper_parameters;
  std::vector<OptimizerParamState> params;  ///< named_parameters order, those with state
  int64_t epochs = 0;                       ///< completed epochs (the caller's counter)
  int64_t steps = 0;                        ///< optimizer steps taken (the caller's counter)
  /// The trainer's own settings (export-cli train: its options), compared on resume by it.
  std::vector<std::pair<std::string, std::string>> settings;
  /// Generator name -> at::Generator::get_state() (uint8, 1-dim): "cpu" and "cuda:<i>" for
  /// the default generators (add_default_generators), other names for the caller's own.
  std::vector<std::pair<std::string, at::Tensor>> generators;

  /// The value of setting `key`, or null.
  const std::string* setting(const std::string& key) const;
  /// The state of generator `name`, or an undefined tensor.
  at::Tensor generator(const std::string& name) const;
  /// The hyper-parameter `name`. @throws InputError when absent.
  double hyper_parameter(const std::string& name) const;
};

/// The state of `optimizer` (a torch::optim::SGD or Adam over parameters of `model`, one param
/// group) as a TrainingState: optimizer name, hyper-parameters, the per-parameter state by FQN
/// (tensors shared, not copied). epochs/steps/settings/generators are left for the caller.
/// @throws InputError for another optimizer type, several param groups, or state for a tensor
///   that is not a trainable parameter of `model`.
TrainingState capture_optimizer_state(const Model& model, const torch::optim::Optimizer& optimizer);

/// Replaces the state of `optimizer` (built by the caller with the same type and options over
/// `model`'s trainable parameters, like torch.optim's load_state_dict expects) with `state`'s,
/// copying each tensor to its parameter's device.
/// @throws InputError, one line naming the first difference, when the optimizer type or a
///   hyper-parameter differs (`lr` included: step an LR schedule to the saved position first),
///   or a parameter with state is not in the optimizer.
void restore_optimizer_state(const TrainingState& state, const Model& model,
                             torch::optim::Optimizer& optimizer);

/// Adds the states of the default generators the graphs' random ops draw from (dropout):
/// "cpu", and "cuda:<i>" when `device` is CUDA device i (at::globalContext().defaultGenerator).
void add_default_generators(TrainingState& state, c10::Device device);
/// Sets the default generators named in `state` ("cpu", "cuda:<i>") to the stored states.
/// @throws InputError when a state is not one the generator accepts (its set_state refuses).
void restore_default_generators(const TrainingState& state);
/// `gen`'s state (at::Generator::get_state, under its mutex); and setting it.
at::Tensor generator_state(const at::Generator& gen);
/// @throws InputError when `gen` refuses the state (wrong size for its kind).
void set_generator_state(at::Generator& gen, const at::Tensor& state, const std::string& name);

/// Model::save plus `state`: the current weights and the training state written together into
/// a copy of the source archive (atomically: temp file, fsync, rename). Replaces any training
/// state the source had. @throws Error as Model::save; InputError when `state` names a
/// parameter `model` lacks or a tensor whose dtype/sizes differ from its parameter's.
void save_training_state(const Model& model, const TrainingState& state, const std::string& path);

/// The training state stored in the archive `model` was loaded from, std::nullopt when it has
/// none (or the model has no source archive). Tensors are on the CPU, owned by the result.
/// Checks (archive contents are untrusted): state.fb within ArchiveLimits::max_entry_bytes,
/// FlatBuffers-verified with identifier "PT2T", schema major equal; optimizer "sgd"/"adam"
/// with exactly its hyper-parameters, finite; each parameter FQN a trainable parameter of
/// `model`, once; state names those of the optimizer (all of them), each tensor's dtype and
/// sizes equal to its parameter's, its entry `optimizer/<n>` present with exactly that many
/// bytes and used once; no other `optimizer/` entry; counters >= 0; at most 1024 settings and
/// 64 generators, names and values of bounded length, generator states <= 1 MiB.
/// @throws FormatError naming the archive and what is wrong.
std::optional<TrainingState> load_training_state(const Model& model);
/// The same checks against `program`'s trainable parameters (Program::weights), for tools that
/// read an archive without building a model (export-cli inspect).
std::optional<TrainingState> load_training_state(const Archive& archive, const Program& program);

/// One line describing `state`, as `export-cli inspect` prints it:
/// "sgd (lr 0.01, momentum 0.9, ...), state for 4 parameters (2 tensors, 1234 bytes), epochs 2,
/// steps 20".
std::string summarize(const TrainingState& state);

}  // namespace pt2rt
