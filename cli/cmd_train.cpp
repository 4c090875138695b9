// export-cli train — fine-tune a model.pt2 in C++ (no Python) and save the new weights.
//
//   export-cli train <model.pt2> --data train.pt [--eval-data test.pt] [--epochs N]
//                    [--batch-size B] [--lr LR] [--optimizer sgd|adam] [--momentum M]
//                    [--weight-decay W] [--loss cross_entropy|mse] [--seed S]
//                    [--device cpu|cuda] [--save tuned.pt2]
//
// --seed S also seeds every default generator the graphs draw from (torch::manual_seed: the
// CPU one and each CUDA device's), so dropout masks and other random ops repeat: two runs
// with the same seed, data and device give identical losses.
//
// Data files hold `(inputs, targets)` as torch.save writes them. Every epoch shuffles the
// training samples (at::randperm on a CPU generator seeded once with --seed) and runs
// batches of --batch-size; with a dynamic batch dimension (exported with dynamic_shapes) the
// last, partial batch of each epoch is trained on too, and eval batches are not padded; with
// a static one the remainder of each epoch is skipped (it changes with the shuffle) and eval
// zero-pads the last batch, ignoring the padding. The loss is computed on user output 0.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli.h"
#include "distributed_train.h"
#include "options.h"
#include "progress.h"
#include "pt2rt/model.h"
#include "signature.h"
#include "tensor_io.h"

namespace pt2rt::cli {
namespace {

struct Settings {
  std::string loss = "cross_entropy";
  int64_t batch = 0;
  bool dynamic_batch = false;  ///< dim 0 of input 0 is symbolic: any batch size in its range
  c10::Device device = c10::kCPU;
};

at::Tensor compute_loss(const Settings& s, const at::Tensor& out, const at::Tensor& target,
                        int64_t reduction) {
  if (s.loss == "mse") return at::mse_loss(out, target.to(out.scalar_type()), reduction);
  return at::cross_entropy_loss(out, target, {}, reduction);
}

/// Checks targets against the loss before the first step (clear message, exit 2).
void check_targets(const Settings& s, const at::Tensor& targets, const std::string& what) {
  if (s.loss == "cross_entropy") {
    if (targets.scalar_type() == at::kLong) {
      if (targets.dim() != 1) {
        throw UsageError(what + ": cross_entropy class targets must be int64[N], got " +
                         describe(targets));
      }
      if (targets.numel() > 0 && targets.min().item<int64_t>() < 0) {
        throw UsageError(what + ": cross_entropy class targets must be >= 0");
      }
    } else if (!targets.is_floating_point()) {
      throw UsageError(what +
                       ": cross_entropy targets must be int64 class indices or float "
                       "probabilities, got " +
                       describe(targets));
    }
  } else if (!targets.is_floating_point()) {
    throw UsageError(what + ": mse targets must be floating point, got " + describe(targets));
  }
}

struct EvalResult {
  double loss = 0.0;
  double accuracy = -1.0;  ///< -1 when not defined for these targets
};

/// Mean loss and accuracy over (inputs, targets) in eval mode (inference graph).
EvalResult evaluate(Model& model, const Settings& s, const at::Tensor& inputs,
                    const at::Tensor& targets) {
  model.eval();
  c10::InferenceMode guard;
  const int64_t n = inputs.size(0);
  double loss_sum = 0.0;
  int64_t correct = 0;
  bool has_accuracy = true;
  for (int64_t start = 0; start < n; start += s.batch) {
    const int64_t count = std::min(s.batch, n - start);
    at::Tensor x = inputs.slice(0, start, start + count);
    if (count < s.batch && !s.dynamic_batch) {  // static batch: pad with zeros, ignore them
      auto sizes = x.sizes().vec();
      sizes[0] = s.batch - count;
      x = at::cat({x, at::zeros(sizes, x.options())});
    }
    at::Tensor out = model.forward({x.to(s.device)})[0].slice(0, 0, count).to(at::kCPU);
    at::Tensor y = targets.slice(0, start, start + count);
    loss_sum += compute_loss(s, out, y, at::Reduction::Sum).item<double>();
    if (out.dim() == 2 && y.scalar_type() == at::kLong && y.dim() == 1) {
      correct += out.argmax(1).eq(y).sum().item<int64_t>();
    } else if (out.dim() == 2 && y.dim() == 2) {
      correct += out.argmax(1).eq(y.argmax(1)).sum().item<int64_t>();
    } else {
      has_accuracy = false;
    }
  }
  EvalResult r;
  // mse with Sum reduction adds over elements; report the per-element mean like Mean would.
  const double denom = s.loss == "mse" ? static_cast<double>(targets.numel()) : n;
  r.loss = loss_sum / std::max(1.0, denom);
  if (has_accuracy) r.accuracy = static_cast<double>(correct) / std::max<int64_t>(1, n);
  return r;
}

std::string eval_string(const EvalResult& r) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(4) << "eval_loss " << r.loss;
  if (r.accuracy >= 0) out << "  eval_accuracy " << r.accuracy;
  return out.str();
}

}  // namespace

int cmd_train(int argc, char** argv) {
  cxxopts::Options options = model_options(
      "train",
      "Fine-tune a pt2rt archive in C++: torch::optim over the model's parameters, the "
      "archive's forward and backward graphs, and an atomic --save of the new weights.\n",
      "archive to train");
  // clang-format off
  options.add_options()
      ("data", "torch.save file with (inputs, targets)", cxxopts::value<std::string>())
      ("eval-data", "torch.save file with (inputs, targets) to evaluate on before training "
                    "and after each epoch", cxxopts::value<std::string>())
      ("epochs", "passes over the data", cxxopts::value<int>()->default_value("1"))
      ("batch-size", "samples per step (default: the archive's static batch size, else 32)",
       cxxopts::value<int64_t>())
      ("lr", "learning rate", cxxopts::value<double>()->default_value("0.01"))
      ("optimizer", "sgd or adam", cxxopts::value<std::string>()->default_value("sgd"))
      ("momentum", "SGD momentum", cxxopts::value<double>()->default_value("0"))
      ("weight-decay", "L2 penalty", cxxopts::value<double>()->default_value("0"))
      ("loss", "cross_entropy (int64 class targets or float probabilities) or mse",
       cxxopts::value<std::string>()->default_value("cross_entropy"))
      ("seed", "seed of the per-epoch shuffle and of the graphs' random ops (torch::manual_seed)", cxxopts::value<uint64_t>()->default_value("0"))
      ("device", "cpu or cuda[:index]", cxxopts::value<std::string>()->default_value("cpu"))
      ("save", "write the fine-tuned archive here (atomically)", cxxopts::value<std::string>());
  // clang-format on
  add_load_options(options);
  add_distributed_options(options);  // distributed_train.h
  const auto args = parse_model_options(options, argc, argv);
  if (!args) return kExitOk;
  const cxxopts::ParseResult& result = args->result;
  const std::string& path = args->path;
  if (!result.count("data")) throw UsageError("missing --data train.pt (see --help)");
  Settings s;
  s.loss = result["loss"].as<std::string>();
  if (s.loss != "cross_entropy" && s.loss != "mse") {
    throw UsageError("--loss must be cross_entropy or mse, got '" + s.loss + "'");
  }
  const std::string opt_name = result["optimizer"].as<std::string>();
  if (opt_name != "sgd" && opt_name != "adam") {
    throw UsageError("--optimizer must be sgd or adam, got '" + opt_name + "'");
  }
  const int epochs = result["epochs"].as<int>();
  const double lr = result["lr"].as<double>();
  if (epochs < 0) throw UsageError("--epochs must be >= 0");
  if (!(lr > 0)) throw UsageError("--lr must be > 0");
  s.device = parse_device(result["device"].as<std::string>());

  auto [inputs, targets] = load_dataset(result["data"].as<std::string>(), "--data");
  check_targets(s, targets, "--data");
  at::Tensor eval_inputs, eval_targets;
  if (result.count("eval-data")) {
    std::tie(eval_inputs, eval_targets) =
        load_dataset(result["eval-data"].as<std::string>(), "--eval-data");
    check_targets(s, eval_targets, "--eval-data");
  }

  Model model = Model::load(path, s.device, load_options(result));
  const Program& program = model.program();
  if (program.graph(GraphRole::Forward) == nullptr ||
      program.graph(GraphRole::Backward) == nullptr) {
    throw UsageError(path + " has no forward/backward graphs (exported without training)");
  }
  const auto fixed_batch = static_batch_size(program);
  if (result.count("batch-size")) {
    s.batch = result["batch-size"].as<int64_t>();
    if (s.batch <= 0) throw UsageError("--batch-size must be > 0");
    if (fixed_batch && *fixed_batch != s.batch) {
      throw UsageError("--batch-size " + std::to_string(s.batch) +
                       " differs from the archive's static batch size " +
                       std::to_string(*fixed_batch) + " (dimension 0 of input 0)");
    }
  } else {
    s.batch = fixed_batch.value_or(32);
  }
  s.dynamic_batch = !fixed_batch.has_value();
  const int64_t n = inputs.size(0);
  if (n < s.batch) {
    throw UsageError("--data has " + std::to_string(n) + " samples, fewer than one batch of " +
                     std::to_string(s.batch));
  }
  // Data-parallel (distributed_train.h): --nproc-per-node launches the ranks and waits; a rank
  // joins its job here.
  if (auto code = launch_local_workers(result, argc, argv)) return *code;
  DistributedTraining dist(result, model);
  const int64_t n_rank = dist.local_count(n);  // samples of this rank per epoch
  if (n_rank < s.batch) {
    throw UsageError("--data has " + std::to_string(n_rank) + " samples per process, fewer "
                     "than one batch of " + std::to_string(s.batch));
  }

  std::vector<at::Tensor> params;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  if (opt_name == "adam") {
    optimizer = std::make_unique<torch::optim::Adam>(
        params, torch::optim::AdamOptions(lr).weight_decay(result["weight-decay"].as<double>()));
  } else {
    optimizer = std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(lr)
                    .momentum(result["momentum"].as<double>())
                    .weight_decay(result["weight-decay"].as<double>()));
  }

  const int64_t steps = s.dynamic_batch ? (n_rank + s.batch - 1) / s.batch : n_rank / s.batch;
  std::cout << "training " << path << ": " << n << " samples " << describe(inputs) << ", " << steps
            << " batches of " << s.batch << " per epoch";
  if (n_rank % s.batch) {
    if (s.dynamic_batch) std::cout << " (the last one of " << n_rank % s.batch << ")";
    else std::cout << " (" << n_rank % s.batch << " left out of each shuffled epoch)";
  }
  const int64_t per_epoch = s.dynamic_batch ? n_rank : steps * s.batch;
  std::cout << "\n  " << opt_name << " lr " << lr << ", loss " << s.loss << ", " << params.size()
            << " trainable parameters, seed " << result["seed"].as<uint64_t>() << ", device "
            << s.device << "\n";
  if (eval_inputs.defined()) {
    std::cout << "before training: " << eval_string(evaluate(model, s, eval_inputs, eval_targets))
              << std::endl;
  }

  torch::manual_seed(result["seed"].as<uint64_t>());  // the graphs' random ops (dropout)
  at::Generator gen = at::detail::createCPUGenerator(result["seed"].as<uint64_t>());
  const auto start = std::chrono::steady_clock::now();
  double train_loss = 0.0;
  EvalResult last_eval;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model.train();
    const at::Tensor perm = dist.shard(at::randperm(n, gen, at::kLong));
    Progress progress(epoch, epochs, per_epoch);
    double loss_sum = 0.0;
    for (int64_t step = 0; step < steps; ++step) {
      const at::Tensor idx =
          perm.slice(0, step * s.batch, std::min(n_rank, (step + 1) * s.batch));
      at::Tensor x = inputs.index_select(0, idx).to(s.device);
      at::Tensor y = targets.index_select(0, idx).to(s.device);
      at::Tensor out = dist.forward({x})[0];
      at::Tensor loss = compute_loss(s, out, y, at::Reduction::Mean);
      optimizer->zero_grad();
      loss.backward();
      dist.average_gradients();
      optimizer->step();
      loss_sum += loss.item<double>();
      progress.update(std::min(per_epoch, (step + 1) * s.batch),
                      loss_sum / static_cast<double>(step + 1));
    }
    progress.finish();
    const double secs = progress.elapsed_s();
    train_loss = dist.global_mean_loss(loss_sum, steps);
    std::cout << "epoch " << epoch << "/" << epochs << "  loss " << std::fixed
              << std::setprecision(4) << train_loss;
    if (eval_inputs.defined()) {
      dist.sync_for_eval();
      last_eval = evaluate(model, s, eval_inputs, eval_targets);
      std::cout << "  " << eval_string(last_eval);
    }
    std::cout << "  (" << std::setprecision(2) << secs << " s, " << std::setprecision(0)
              << (secs > 0 ? per_epoch * dist.world_size() / secs : 0.0) << " samples/s)"
              << std::defaultfloat
              << std::endl;
  }
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "final: train_loss " << std::fixed << std::setprecision(4) << train_loss;
  if (eval_inputs.defined() && epochs > 0) std::cout << "  " << eval_string(last_eval);
  std::cout << "  (" << std::setprecision(2) << total << " s)" << std::defaultfloat << "\n";

  dist.report(total);
  if (result.count("save") && dist.saves()) {
    model.save(result["save"].as<std::string>());
    std::cout << "saved " << result["save"].as<std::string>() << "\n";
  }
  return kExitOk;
}

}  // namespace pt2rt::cli
