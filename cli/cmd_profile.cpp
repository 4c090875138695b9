// export-cli profile — where the time of a pt2rt call goes, per operator (the ETDump /
// Inspector analogue).
//
//   export-cli profile <model.pt2> [--train] [--iters N] [--warmup W] [--inputs in.pt]
//                      [--device cpu|cuda] [--json]
//
// Runs W untimed calls, then N calls (inference, or with --train the training forward and
// the backward with ones as cotangents) while op_profile.h's RecordFunction observers time
// every outermost operator call. Prints one row per operator: calls, total and mean time, and
// share of the measured call time (the wall time of the N calls); the rows' sum is the time
// spent inside operators, the rest is pt2rt's interpreter, its own prim::/sym:: nodes and
// autograd. --json prints {"model", "mode", "iters", "measured_us", "ops_us", "rows": [{"op",
// "calls", "total_us", "mean_us", "share"}]}.
#include <chrono>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "op_profile.h"
#include "options.h"
#include "pt2rt/model.h"
#include "steps.h"
#include "tensor_io.h"
#include "terminal.h"

namespace pt2rt::cli {

int cmd_profile(int argc, char** argv) {
  cxxopts::Options options = model_options(
      "profile",
      "Time a pt2rt archive's calls per operator (LibTorch RecordFunction observers).\n",
      "archive to profile");
  // clang-format off
  options.add_options()
      ("train", "profile the training forward and the backward (ones as cotangents)")
      ("iters", "timed calls", cxxopts::value<int>()->default_value("10"))
      ("warmup", "untimed calls first", cxxopts::value<int>()->default_value("2"))
      ("inputs", "torch.save file with the input tensors (default: the bundled example)",
       cxxopts::value<std::string>())
      ("device", "cpu or cuda[:index]", cxxopts::value<std::string>()->default_value("cpu"))
      ("json", "print the table as one JSON object");
  // clang-format on
  add_load_options(options);
  const auto args = parse_model_options(options, argc, argv);
  if (!args) return kExitOk;
  const cxxopts::ParseResult& result = args->result;
  const std::string& path = args->path;
  const int iters = result["iters"].as<int>(), warmup = result["warmup"].as<int>();
  if (iters < 1) throw UsageError("--iters must be >= 1");
  if (warmup < 0) throw UsageError("--warmup must be >= 0");
  const bool train = result.count("train") > 0;
  const c10::Device device = parse_device(result["device"].as<std::string>());
  std::vector<at::Tensor> inputs;
  if (result.count("inputs")) {
    inputs = load_tensor_list(result["inputs"].as<std::string>(), "--inputs");
  }
  Model model = Model::load(path, device, load_options(result));
  if (!result.count("inputs")) {
    const std::vector<Example> examples = model.examples();
    if (examples.empty()) throw UsageError(path + " has no bundled example; give --inputs");
    for (const auto& t : examples[0].inputs) inputs.push_back(to_tensor(t));
  }
  inputs = to_device(inputs, device);
  if (train && !has_training_graphs(model.program())) {
    throw UsageError(path + " has no forward/backward graphs (exported without training)");
  }
  const NamedTensors buffers = snapshot_buffers(model);
  auto call = [&] {
    if (train) {
      run_training_step(model, inputs, {});
    } else {
      double ms = 0.0;
      run_inference(model, inputs, &ms);
    }
  };
  for (int i = 0; i < warmup; ++i) call();
  OpProfile profile;
  profile.reset();
  double measured_us = 0.0;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    measured_us +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
            .count();
  }
  const std::vector<OpRow> rows = profile.rows();
  restore_buffers(model, buffers);  // the training forwards updated BatchNorm statistics
  double ops_us = 0.0;
  for (const auto& r : rows) ops_us += r.total_us;

  if (result.count("json")) {
    nlohmann::ordered_json j;
    j["model"] = path;
    j["mode"] = train ? "train" : "inference";
    j["iters"] = iters;
    j["measured_us"] = measured_us;
    j["ops_us"] = ops_us;
    j["rows"] = nlohmann::ordered_json::array();
    for (const auto& r : rows) {
      j["rows"].push_back({{"op", r.op},
                           {"calls", r.calls},
                           {"total_us", r.total_us},
                           {"mean_us", r.total_us / static_cast<double>(r.calls)},
                           {"share", measured_us > 0 ? r.total_us / measured_us : 0.0}});
    }
    std::cout << j.dump(2, ' ', true, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    return kExitOk;
  }
  std::cout << path << ": " << (train ? "training forward + backward" : "inference") << ", "
            << iters << " calls, " << std::fixed << std::setprecision(3)
            << measured_us / iters / 1000.0 << " ms per call; operators "
            << std::setprecision(1) << (measured_us > 0 ? 100.0 * ops_us / measured_us : 0.0)
            << " % of it\n";
  std::cout << std::left << std::setw(44) << "op" << std::right << std::setw(8) << "calls"
            << std::setw(13) << "total ms" << std::setw(12) << "mean us" << std::setw(9)
            << "share" << "\n";
  for (const auto& r : rows) {
    std::cout << std::left << std::setw(44) << terminal_safe(r.op) << std::right << std::setw(8)
              << r.calls << std::setw(13) << std::setprecision(3) << r.total_us / 1000.0
              << std::setw(12) << std::setprecision(1) << r.total_us / r.calls << std::setw(8)
              << std::setprecision(1) << 100.0 * r.total_us / measured_us << "%\n";
  }
  return kExitOk;
}

}  // namespace pt2rt::cli
