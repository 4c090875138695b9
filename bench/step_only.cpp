// bench/step_only.cpp — pt2rt_bench_step: one contender's training step in a loop, for
// perf record / callgrind (pt2rt_bench interleaves every contender in one process).
//
//   pt2rt_bench_step MODEL.pt2 MODEL_train.ts --profile pt2rt|ts [--rounds N]
//                    [--trainable PREFIX] [--loss ce|mse]
//
// The inputs are the archive's bundled example (Model::example_inputs); the cross-entropy
// target is class 0 for every row. Not a test: prints the minimum step time.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <chrono>
#include <map>
#include <memory>

#include <cstdio>
#include <cstring>
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

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: pt2rt_bench_step MODEL.pt2 MODEL_train.ts --profile pt2rt|ts "
                         "[--rounds N] [--trainable PREFIX] [--loss ce|mse]\n");
    return 2;
  }
  const std::string pt2 = argv[1], ts = argv[2];
  std::string profile = "pt2rt";
  int rounds = 20;
  pt2rt::bench::Workload w;
  w.loss = "ce";
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--profile")) profile = argv[i + 1];
    else if (!std::strcmp(argv[i], "--rounds")) rounds = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--trainable")) w.trainable_prefix = argv[i + 1];
    else if (!std::strcmp(argv[i], "--loss")) w.loss = argv[i + 1];
  }
  bool ops = false;
  for (int i = 3; i < argc; ++i) ops = ops || !std::strcmp(argv[i], "--ops");
  at::set_num_threads(1);
  w.inputs = pt2rt::Model::load(pt2).example_inputs();
  if (w.loss == "ce") w.target = at::zeros({w.inputs[0].size(0)}, at::kLong);
  const pt2rt::bench::Call step = profile == "ts" ? pt2rt::bench::torchscript_training(ts, w)
                                                  : pt2rt::bench::pt2rt_training(pt2, w);
  const std::vector<double> t =
      pt2rt::bench::interleaved_min({step}, rounds, 2, pt2rt::bench::Clock::ThreadCpu);
  std::printf("%s step %.3f ms (thread CPU, min of %d)\n", profile.c_str(), t[0] * 1e3, rounds);
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
