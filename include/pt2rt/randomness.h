// pt2rt/randomness.h — which results of a Program depend on random numbers its graphs draw.
//
// A node draws random numbers when its operator carries ATen's `nondeterministic_seeded` tag
// (tags.yaml: bernoulli, rand*, randn*, normal, native_dropout, randperm, rrelu_with_noise, ...;
// `c10::OperatorHandle::hasTag`). Its outputs, and everything computed from them, depend on
// the state of the generator the kernel reads: the default CPU (or CUDA) generator, seeded
// with `torch::manual_seed`. Within one LibTorch build, seeding and calling in the same order
// replays the same numbers (how `export-cli verify` reproduces the eager references of a
// model with dropout); another LibTorch version or device may draw different ones.
//
// The dependence is followed through the data flow of the inference graph, and of the
// forward graph into the backward graph through the saved activations.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include <c10/core/Device.h>

#include "pt2rt/program.h"

namespace pt2rt {

/// The results that depend on random draws. Empty sets and `any == false` when no graph
/// calls a `nondeterministic_seeded` operator.
struct RandomDependence {
  bool any = false;                    ///< some graph draws random numbers
  std::set<int64_t> outputs;           ///< inference graph: Plain(i) outputs, by i
  std::set<int64_t> train_outputs;     ///< forward graph: Plain(i) outputs, by i
  std::set<std::string> grads;         ///< backward: parameter FQNs and "input:<i>"
  std::set<std::string> buffers;       ///< buffers updated in forward (InputMutation), by FQN
};

/// Analyses `program` against the running LibTorch's operator registry (operators it does not
/// know, and pt2rt's own prim::/sym:: ops, draw nothing). Does not throw.
RandomDependence random_dependence(const Program& program);

/// The seed the exporter gave the default generator before each eager reference run
/// (metadata "reference_rng_seed"; pt2rt.export seeds eval and training runs alike), or
/// nullopt for archives written before references were seeded.
std::optional<uint64_t> reference_rng_seed(const Program& program);

/// False when the exporter found that the graphs draw random numbers in another order or
/// amount than eager PyTorch did on the example (metadata "reference_draws" = "differ": a
/// functional `bernoulli` where eager filled a tensor in place, rrelu's noise), so that no
/// seeding replays eager's results; true otherwise (also for archives that do not say).
bool draws_in_eagers_order(const Program& program);

/// Whether seeding the default generator with reference_rng_seed() before a run makes it draw
/// what the exporter's eager run drew: the seed is recorded, the graphs draw in eager's order
/// (draws_in_eagers_order), `device` is a CPU, and the running LibTorch has the exporter's
/// torch major.minor version (Producer::torch_version; kernels draw in different orders or
/// amounts across versions and devices).
bool replays_reference_draws(const Program& program, const c10::Device& device);

/// The running LibTorch's version, "major.minor.patch" (torch/version.h).
std::string running_libtorch_version();

}  // namespace pt2rt
