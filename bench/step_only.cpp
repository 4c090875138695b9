// bench/step_only.cpp — pt2rt_bench_step: one contender's training step (or inference call)
// in a loop, for perf record / callgrind (pt2rt_bench interleaves every contender in one
// process).
//
//   pt2rt_bench_step MODEL.pt2 MODEL_train.ts --profile pt2rt|ts [--rounds N]
//                    [--trainable PREFIX] [--loss ce|mse] [--ops]
//   pt2rt_bench_step MODEL_fold.pt2 MODEL_eval.ts --profile pt2rt_infer|pt2rt_serve|pt2rt_tuned|ts_frozen|ts_optimized [--rounds N]
//                    [--examples-from MODEL.pt2]
//
// pt2rt_bench's work directory has the files (<model>.pt2, <model>_fold.pt2,
// <model>_train.ts, <model>_eval.ts). The inputs are the bundled example of MODEL.pt2
// (Model::example_inputs), or of --examples-from (pt2rt_bench's _fold archives bundle none);
// the cross-entropy target is class 0 for every row. Prints the minimum time per call
// (thread CPU time, 1 intra-op thread). pt2rt_tuned: pt2rt_serve with LoadOptions::onednn_benchmark;
// ts_optimized: torch::jit::optimize_for_inference. --ops then runs N more calls counting, per operator
// name, the calls and their inclusive wall time (RecordFunction callbacks). Not a test.
// Exit status 2 with one line on stderr for bad options or a failing load.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "measure.h"
#include "pt2rt/model.h"
#include "workload.h"

namespace {

// --ops: per operator name, calls and inclusive wall time (RecordFunction callbacks, the
// hooks LibTorch's profiler uses; nested calls count in their callers too).
struct OpTotals {
  int64_t calls = 0;
  double seconds = 0;
};
std::map<std::string, OpTotals> g_ops;
struct Started : at::ObserverContext {
  std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
};

void count_ops() {
  at::addGlobalCallback(
      at::RecordFunctionCallback(
          [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
            return std::make_unique<Started>();
          },
          [](const at::RecordFunction& fn, at::ObserverContext* ctx) {
            OpTotals& o = g_ops[fn.name()];
            ++o.calls;
            o.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                                       static_cast<Started*>(ctx)->t)
                             .count();
          })
          .needsInputs(false));
}

}  // namespace

static int run(const std::string& pt2, const std::string& ts, const std::string& profile,
               const std::string& examples, int rounds, bool ops, pt2rt::bench::Workload w);

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: pt2rt_bench_step MODEL.pt2 MODEL.ts "
                         "--profile pt2rt|ts|pt2rt_infer|pt2rt_serve|pt2rt_tuned|ts_frozen|ts_optimized "
                         "[--rounds N] "
                         "[--trainable PREFIX] [--loss ce|mse] [--examples-from A.pt2] [--ops]\n");
    return 2;
  }
  const std::string pt2 = argv[1], ts = argv[2];
  std::string profile = "pt2rt";
  int rounds = 20;
  pt2rt::bench::Workload w;
  w.loss = "ce";
  bool ops = false;
  std::string examples = pt2;
  for (int i = 3; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (!std::strcmp(argv[i], "--ops")) ops = true;
    else if (!std::strcmp(argv[i], "--profile") && has_value) profile = argv[++i];
    else if (!std::strcmp(argv[i], "--rounds") && has_value) rounds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--trainable") && has_value) w.trainable_prefix = argv[++i];
    else if (!std::strcmp(argv[i], "--loss") && has_value) w.loss = argv[++i];
    else if (!std::strcmp(argv[i], "--examples-from") && has_value) examples = argv[++i];
    else {
      std::fprintf(stderr, "pt2rt_bench_step: unknown or incomplete option %s\n", argv[i]);
      return 2;
    }
  }
  if (profile != "pt2rt" && profile != "ts" && profile != "pt2rt_infer" && profile != "pt2rt_serve" &&
      profile != "pt2rt_tuned" && profile != "ts_frozen" && profile != "ts_optimized") {
    std::fprintf(stderr, "pt2rt_bench_step: --profile must be pt2rt, ts, pt2rt_infer, pt2rt_serve, "
                         "pt2rt_tuned, ts_frozen or ts_optimized\n");
    return 2;
  }
  if (rounds < 1) {
    std::fprintf(stderr, "pt2rt_bench_step: --rounds must be at least 1\n");
    return 2;
  }
  try {
    return run(pt2, ts, profile, examples, rounds, ops, w);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "pt2rt_bench_step: %s\n", e.what());
    return 2;
  }
}

static int run(const std::string& pt2, const std::string& ts, const std::string& profile,
               const std::string& examples, int rounds, bool ops, pt2rt::bench::Workload w) {
  at::set_num_threads(1);
  w.inputs = pt2rt::Model::load(examples).example_inputs();
  if (w.loss == "ce") w.target = at::zeros({w.inputs[0].size(0)}, at::kLong);
  using pt2rt::bench::TorchScriptPrep;
  const pt2rt::bench::Call step =
      profile == "ts"          ? pt2rt::bench::torchscript_training(ts, w)
      : profile == "ts_frozen" ? pt2rt::bench::torchscript_inference(ts, w, TorchScriptPrep::Freeze)
      : profile == "ts_optimized"
          ? pt2rt::bench::torchscript_inference(ts, w, TorchScriptPrep::OptimizeForInference)
      : profile == "pt2rt_infer" ? pt2rt::bench::pt2rt_inference(pt2, w)
      : profile == "pt2rt_serve" ? pt2rt::bench::pt2rt_inference(pt2, w, /*inference_only=*/true)
      : profile == "pt2rt_tuned"
          ? pt2rt::bench::pt2rt_inference(pt2, w, /*inference_only=*/true, /*onednn_benchmark=*/true)
          : pt2rt::bench::pt2rt_training(pt2, w);
  const std::vector<double> t =
      pt2rt::bench::interleaved_min({step}, rounds, 2, pt2rt::bench::Clock::ThreadCpu);
  std::printf("%s call %.3f ms (thread CPU, min of %d)\n", profile.c_str(), t[0] * 1e3, rounds);
  if (ops) {
    g_ops.clear();
    count_ops();
    for (int i = 0; i < rounds; ++i) step();
    for (const auto& [name, o] : g_ops)
      std::printf("%-48s %8.1f calls %10.1f us\n", name.c_str(), double(o.calls) / rounds,
                  o.seconds * 1e6 / rounds);
  }
  return 0;
}
