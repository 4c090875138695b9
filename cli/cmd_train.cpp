// export-cli train — fine-tune a model.pt2 in C++ (no Python) and save the new weights.
//
//   export-cli train <model.pt2> --data train.pt [--eval-data test.pt] [--epochs N]
//                    [--batch-size B] [--lr LR] [--optimizer sgd|adam] [--momentum M]
//                    [--weight-decay W] [--loss cross_entropy|mse|output]
//                    [--output NAME|INDEX] [--grad-accumulation K]
//                    [--lr-schedule none|step|cosine] [--lr-step-size N] [--lr-gamma G]
//                    [--lr-min LR] [--seed S] [--device cpu|cuda] [--save tuned.pt2]
//                    [--resume]
//
// --seed S also seeds every default generator the graphs draw from (torch::manual_seed: the
// CPU one and each CUDA device's), so dropout masks and other random ops repeat: two runs
// with the same seed, data and device give identical losses.
//
// Data files hold `(inputs, targets)` — `((input_0, input_1, ...), targets)` for a model with
// several inputs — as torch.save writes them. Every epoch shuffles the
// training samples (at::randperm on a CPU generator seeded once with --seed) and runs
// batches of --batch-size; with a dynamic batch dimension (exported with dynamic_shapes) the
// last, partial batch of each epoch is trained on too, and eval batches are not padded; with
// a static one the remainder of each epoch is skipped (it changes with the shuffle) and eval
// zero-pads the last batch, ignoring the padding (`--loss output` evaluates full batches only:
// padded rows would enter the model's own loss). The loss (train_loss.h) is computed on user
// output 0 or --output (index, stored output name or value name: train_loss.h); an output the
// loss cannot use is refused before the first step.
// --grad-accumulation K: one optimizer step per K batches (each batch's loss divided by the
// number of batches in its group, so K batches of B give the gradient of one batch of K·B);
// the epoch's last group may be shorter. --lr-schedule: lr_schedule.h, stepped per epoch.
// --save writes the weights with the training state; --resume continues it (train_resume.h).
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
#include "lr_schedule.h"
#include "progress.h"
#include "pt2rt/model.h"
#include "signature.h"
#include "tensor_io.h"
#include "train_loss.h"
#include "train_resume.h"

namespace pt2rt::cli {
namespace {

struct Settings {
  LossSpec loss;
  int64_t batch = 0;
  bool dynamic_batch = false;  ///< dim 0 of input 0 is symbolic: any batch size in its range
  int64_t grad_accumulation = 1;
  c10::Device device = c10::kCPU;
};

struct EvalResult {
  double loss = 0.0;
  double accuracy = -1.0;  ///< -1 when not defined for these targets
};

/// Mean loss and accuracy over `data` in eval mode (inference graph). Data-parallel: rank r
/// evaluates batches r, r + W, ... and the sums are all-reduced, so every rank gets the
/// figures one process would print.
EvalResult evaluate(Model& model, const Settings& s, const Dataset& data,
                    DistributedTraining& dist) {
  model.eval();
  c10::InferenceMode guard;
  const bool own_loss = s.loss.kind == "output";
  const int64_t n = own_loss && !s.dynamic_batch ? data.size() / s.batch * s.batch : data.size();
  double loss_sum = 0.0;
  int64_t correct = 0;
  bool has_accuracy = !own_loss;
  const int64_t stride = s.batch * dist.world_size();
  for (int64_t start = s.batch * dist.rank(); start < n; start += stride) {
    const int64_t count = std::min(s.batch, n - start);
    std::vector<at::Tensor> xs =
        model_inputs(s.loss, data, at::arange(start, start + count, at::kLong), s.device);
    if (count < s.batch && !s.dynamic_batch) {  // static batch: pad with zeros, ignore them
      for (auto& x : xs) {
        auto sizes = x.sizes().vec();
        sizes[0] = s.batch - count;
        x = at::cat({x, at::zeros(sizes, x.options())});
      }
    }
    std::vector<at::Tensor> outs = model.forward(xs);
    at::Tensor y = data.targets.slice(0, start, start + count);
    if (own_loss) {
      loss_sum += compute_loss(s.loss, outs, y, at::Reduction::Mean).item<double>() * count;
      continue;
    }
    at::Tensor& out = outs.at(s.loss.output);
    out = out.slice(0, 0, count).to(at::kCPU);
    loss_sum += compute_loss(s.loss, outs, y, at::Reduction::Sum).item<double>();
    if (out.dim() == 2 && y.scalar_type() == at::kLong && y.dim() == 1) {
      correct += out.argmax(1).eq(y).sum().item<int64_t>();
    } else if (out.dim() == 2 && y.dim() == 2) {
      correct += out.argmax(1).eq(y.argmax(1)).sum().item<int64_t>();
    } else {
      has_accuracy = false;
    }
  }
  std::vector<double> sums{loss_sum, static_cast<double>(correct), has_accuracy ? 0.0 : 1.0};
  dist.sum_over_ranks(sums, "eval metrics all-reduce");
  loss_sum = sums[0];
  correct = static_cast<int64_t>(sums[1]);
  has_accuracy = sums[2] == 0.0;
  EvalResult r;
  // mse with Sum reduction adds over elements; report the per-element mean like Mean would.
  double denom = static_cast<double>(n);
  if (s.loss.kind == "mse") denom = static_cast<double>(data.targets.numel());
  if (s.loss.kind == "cross_entropy" && data.targets.scalar_type() == at::kLong) {
    denom = static_cast<double>(data.targets.numel());  // [N, d1...] targets: per element
  }
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
      ("loss", "cross_entropy (int64 class targets or float probabilities), mse, or output "
               "(the model computes its loss in forward; the targets are its last input)",
       cxxopts::value<std::string>()->default_value("cross_entropy"))
      ("output", "the user output the loss is computed on: its index, its stored name as "
                 "inspect lists it (['logits'] or logits) or its graph value's name (default: "
                 "output 0)", cxxopts::value<std::string>())
      ("grad-accumulation", "batches per optimizer step (gradients accumulated)",
       cxxopts::value<int64_t>()->default_value("1"))
      ("lr-schedule", "none, step (torch::optim::StepLR) or cosine (CosineAnnealingLR over "
                      "--epochs), stepped per epoch", cxxopts::value<std::string>()->default_value("none"))
      ("lr-step-size", "step: epochs between decays", cxxopts::value<unsigned>()->default_value("1"))
      ("lr-gamma", "step: decay factor", cxxopts::value<double>()->default_value("0.1"))
      ("lr-min", "cosine: the final learning rate (eta_min)", cxxopts::value<double>()->default_value("0"))
      ("seed", "seed of the per-epoch shuffle and of the graphs' random ops (torch::manual_seed)", cxxopts::value<uint64_t>()->default_value("0"))
      ("device", "cpu or cuda[:index]", cxxopts::value<std::string>()->default_value("cpu"))
      ("cuda-graphs", "with --device cuda: replay each batch shape's forward and backward from "
       "CUDA graphs (LoadOptions::cuda_graphs)")
      ("save", "write the fine-tuned archive here (atomically)", cxxopts::value<std::string>());
  // clang-format on
  add_resume_options(options);       // train_resume.h
  add_load_options(options);
  add_distributed_options(options);  // distributed_train.h
  const auto args = parse_model_options(options, argc, argv);
  if (!args) return kExitOk;
  const cxxopts::ParseResult& result = args->result;
  const std::string& path = args->path;
  if (!result.count("data")) throw UsageError("missing --data train.pt (see --help)");
  Settings s;
  s.device = rank_device(parse_device(result["device"].as<std::string>()));
  LoadOptions load = load_options(result);
  load.cuda_graphs = cuda_graphs_option(result, s.device);
  Model model = Model::load(path, s.device, load);
  TrainOptions opts(result, model, path);  // with --resume: the stored settings (train_resume.h)
  const std::string loss_name = opts.text("loss");
  check_loss_kind(loss_name);
  const std::string opt_name = opts.text("optimizer");
  if (opt_name != "sgd" && opt_name != "adam") {
    throw UsageError("--optimizer must be sgd or adam, got '" + opt_name + "'");
  }
  const int epochs = result["epochs"].as<int>();
  const double lr = opts.real("lr");
  if (epochs < 0) throw UsageError("--epochs must be >= 0");
  if (!(lr > 0)) throw UsageError("--lr must be > 0");
  s.grad_accumulation = opts.integer("grad-accumulation");
  if (s.grad_accumulation < 1) throw UsageError("--grad-accumulation must be >= 1");
  LrScheduleOptions schedule;
  schedule.kind = opts.text("lr-schedule");
  schedule.step_size = static_cast<unsigned>(opts.integer("lr-step-size"));
  schedule.gamma = opts.real("lr-gamma");
  schedule.eta_min = opts.real("lr-min");
  schedule.t_max = static_cast<unsigned>(
      opts.count("lr-t-max") ? opts.integer("lr-t-max") : std::max(1, epochs));
  opts.set("lr-t-max", std::to_string(schedule.t_max));

  Dataset data = load_dataset(result["data"].as<std::string>(), "--data");
  check_targets(loss_name, data.targets, "--data");
  Dataset eval_data;
  if (result.count("eval-data")) {
    eval_data = load_dataset(result["eval-data"].as<std::string>(), "--eval-data");
    check_targets(loss_name, eval_data.targets, "--eval-data");
  }

  const Program& program = model.program();
  if (program.graph(GraphRole::Forward) == nullptr ||
      program.graph(GraphRole::Backward) == nullptr) {
    throw UsageError(path + " has no forward/backward graphs (exported without training)");
  }
  const auto fixed_batch = static_batch_size(program);
  if (opts.count("batch-size")) {
    s.batch = opts.integer("batch-size");
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
  opts.set("batch-size", std::to_string(s.batch));
  const std::optional<std::string> output_spec =
      opts.count("output") ? std::optional<std::string>(opts.text("output"))
                             : std::nullopt;
  s.loss = choose_loss(program, loss_name, output_spec, data, s.batch);
  if (eval_data.targets.defined()) {
    if (eval_data.inputs.size() != data.inputs.size()) {
      throw UsageError("--eval-data holds " + std::to_string(eval_data.inputs.size()) +
                       " input tensor(s), --data " + std::to_string(data.inputs.size()));
    }
    choose_loss(program, loss_name, output_spec, eval_data, s.batch);
  }
  const int64_t n = data.size();
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
        params, torch::optim::AdamOptions(lr).weight_decay(opts.real("weight-decay")));
  } else {
    optimizer = std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(lr)
                    .momentum(opts.real("momentum"))
                    .weight_decay(opts.real("weight-decay")));
  }
  const auto scheduler = make_lr_schedule(*optimizer, schedule);

  const int64_t steps = s.dynamic_batch ? (n_rank + s.batch - 1) / s.batch : n_rank / s.batch;
  std::string shapes;
  for (const auto& x : data.inputs) shapes += (shapes.empty() ? "" : ", ") + describe(x);
  std::cout << "training " << path << ": " << n << " samples " << shapes << ", " << steps
            << " batches of " << s.batch << " per epoch";
  if (n_rank % s.batch) {
    if (s.dynamic_batch) std::cout << " (the last one of " << n_rank % s.batch << ")";
    else std::cout << " (" << n_rank % s.batch << " left out of each shuffled epoch)";
  }
  const int64_t per_epoch = s.dynamic_batch ? n_rank : steps * s.batch;
  std::cout << "\n  " << opt_name << " lr " << lr;
  if (scheduler) std::cout << " (" << schedule.kind << " schedule)";
  if (s.grad_accumulation > 1) {
    std::cout << ", " << s.grad_accumulation << " batches per optimizer step";
  }
  std::cout << ", loss " << s.loss.kind << " on " << s.loss.label << ", " << params.size()
            << " trainable parameters, seed " << opts.text("seed") << ", device "
            << s.device << "\n";
  const bool evaluating = eval_data.targets.defined();
  if (evaluating) {
    std::cout << "before training: " << eval_string(evaluate(model, s, eval_data, dist)) << std::endl;
  }

  const uint64_t seed = std::stoull(opts.text("seed"));
  torch::manual_seed(seed);  // the graphs' random ops (dropout)
  at::Generator gen = at::detail::createCPUGenerator(seed);
  opts.restore(model, *optimizer, scheduler.get(), gen);  // --resume: train_resume.h
  const int64_t done = opts.epochs_done();
  int64_t optimizer_steps = 0;
  const auto start = std::chrono::steady_clock::now();
  double train_loss = 0.0;
  EvalResult last_eval;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model.train();
    const at::Tensor perm = dist.shard(at::randperm(n, gen, at::kLong));
    Progress progress(done + epoch, done + epochs, per_epoch);
    double loss_sum = 0.0;
    for (int64_t step = 0; step < steps; ++step) {
      const at::Tensor idx =
          perm.slice(0, step * s.batch, std::min(n_rank, (step + 1) * s.batch));
      // batches [group_start, group_end) share one optimizer step
      const int64_t group_start = step / s.grad_accumulation * s.grad_accumulation;
      const int64_t group_end = std::min(steps, group_start + s.grad_accumulation);
      if (step == group_start) optimizer->zero_grad();
      dist.set_gradient_sync(step + 1 == group_end);  // DDP's no_sync() before that
      std::vector<at::Tensor> outs = dist.forward(model_inputs(s.loss, data, idx, s.device));
      at::Tensor loss = compute_loss(s.loss, outs, data.targets.index_select(0, idx).to(s.device),
                                     at::Reduction::Mean);
      (group_end - group_start > 1 ? loss / static_cast<double>(group_end - group_start) : loss)
          .backward();
      if (step + 1 == group_end) {
        dist.average_gradients();
        optimizer->step();
        ++optimizer_steps;
      }
      loss_sum += loss.item<double>();
      progress.update(std::min(per_epoch, (step + 1) * s.batch),
                      loss_sum / static_cast<double>(step + 1));
    }
    progress.finish();
    const double secs = progress.elapsed_s();
    train_loss = dist.global_mean_loss(loss_sum, steps);
    std::cout << "epoch " << done + epoch << "/" << done + epochs << "  loss " << std::fixed
              << std::setprecision(4) << train_loss;
    if (scheduler) std::cout << "  lr " << std::setprecision(6) << current_lr(*optimizer);
    if (evaluating) {
      dist.sync_for_eval();
      last_eval = evaluate(model, s, eval_data, dist);
      std::cout << "  " << eval_string(last_eval);
    }
    std::cout << "  (" << std::setprecision(2) << secs << " s, " << std::setprecision(0)
              << (secs > 0 ? per_epoch * dist.world_size() / secs : 0.0) << " samples/s)"
              << std::defaultfloat
              << std::endl;
    if (scheduler) scheduler->step();
  }
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "final: train_loss " << std::fixed << std::setprecision(4) << train_loss;
  if (evaluating && epochs > 0) std::cout << "  " << eval_string(last_eval);
  std::cout << "  (" << std::setprecision(2) << total << " s)" << std::defaultfloat << "\n";

  dist.report(total);
  if (load.cuda_graphs) std::cout << "CUDA graphs:\n" << model.cuda_graph_report() << "\n";
  if (result.count("save") && dist.saves()) {
    opts.save(model, *optimizer, s.device, gen, epochs, optimizer_steps,
              result["save"].as<std::string>());
    std::cout << "saved " << result["save"].as<std::string>() << "\n";
  } else if (dist.saves()) {
    std::cerr << "export-cli train: note: no --save, so the trained weights are discarded "
                 "(--save tuned.pt2 keeps them"
              << (result.count("resume") ? ", with the training state to --resume from)" : ")")
              << "\n";
  }

  return kExitOk;
}

}  // namespace pt2rt::cli
