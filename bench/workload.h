// bench/workload.h — what every contender of pt2rt_bench runs on one model, and the
// contenders' C++ entry points (pt2rt in contender_pt2rt.cpp, TorchScript in
// contender_torchscript.cpp; eager PyTorch lives in bench_models.py).
//
// A training step is, for every contender alike: zero the gradients (Tensor::zero_ on each
// defined .grad, as torch.optim's zero_grad(set_to_none=False) and LibTorch 1.13's
// Optimizer::zero_grad do; or reset them to undefined with `set_to_none`), forward, the loss
// (cross entropy against `target`, or out.pow(2).mean()), backward, SGD(lr=0.01).
// Inference: eval mode under c10::InferenceMode (pt2rt, TorchScript), torch.inference_mode
// (eager).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>
#include <vector>

namespace pt2rt::bench {

struct Workload {
  std::vector<at::Tensor> inputs;  ///< float32, the model's example shapes
  at::Tensor target;               ///< int64 [N] class indices ("ce"), undefined ("mse")
  std::string loss;                ///< "ce" or "mse"
  bool set_to_none = false;
  /// Only parameters whose FQN starts with this are trained; the others get
  /// requires_grad_(false) after load (partial fine-tuning). Empty: all.
  std::string trainable_prefix;
};

constexpr double kLearningRate = 0.01;

at::Tensor loss_of(const at::Tensor& out, const Workload& w);
/// zero_grad(set_to_none) over `params`.
void zero_grads(const std::vector<at::Tensor>& params, bool set_to_none);
/// The parameters to train: every (fqn, tensor) matching w.trainable_prefix; the others are
/// frozen (requires_grad_(false)).
std::vector<at::Tensor> trainable(const std::vector<std::pair<std::string, at::Tensor>>& named,
                                  const Workload& w);

using Call = std::function<void()>;

/// pt2rt: Model::load(path) in eval mode (with LoadOptions::inference_only: the deployment
/// load, whose inference plan packs oneDNN convolution weights once: runtime/kernels/conv_prepack.h;
/// with `onednn_benchmark` too, LoadOptions::onednn_benchmark: each convolution and linear
/// layer on the faster of ATen's kernel and oneDNN, timed at load); a call is
/// Model::forward(inputs).
Call pt2rt_inference(const std::string& path, const Workload& w, bool inference_only = false,
                     bool onednn_benchmark = false);
/// pt2rt: Model::load(path), train(); a call is one training step (torch::optim::SGD).
Call pt2rt_training(const std::string& path, const Workload& w);
/// A call loads `path` with Model::load (LoadOptions::map_weights as given: memory-mapped;
/// LoadOptions::inference_only as given: only the inference graph compiled and checked).
Call pt2rt_load(const std::string& path, bool map_weights = false, bool inference_only = false);

/// How a TorchScript inference contender prepares the loaded module.
enum class TorchScriptPrep { None, Freeze, OptimizeForInference };
/// TorchScript: torch::jit::load(path) in eval mode, then `prep`: torch::jit::freeze, or
/// torch::jit::optimize_for_inference (freezes, then e.g. converts CPU convolutions to oneDNN
/// ones); a call is Module::forward(inputs).
Call torchscript_inference(const std::string& path, const Workload& w, TorchScriptPrep prep);
/// TorchScript: torch::jit::load(path) in training mode; one training step per call.
Call torchscript_training(const std::string& path, const Workload& w);
/// A call loads `path` with torch::jit::load.
Call torchscript_load(const std::string& path);

}  // namespace pt2rt::bench
