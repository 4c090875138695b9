// bench/load_only.cpp — pt2rt_bench_load: load times without Python in the process.
//
//   pt2rt_bench_load MODEL.pt2 MODEL.ts [--rounds N] [--clock cpu|wall]
//   pt2rt_bench_load MODEL.pt2 MODEL.ts --profile read|mapped|serving|tuned|ts|ts_opt [--rounds N]
//
// Model::load of MODEL.pt2, read, memory-mapped (LoadOptions::map_weights), memory-mapped
// for serving (map_weights + inference_only, "serving" for --profile) and for serving with
// each convolution and linear layer timed against oneDNN (+ onednn_benchmark, "tuned"), vs
// torch::jit::load of MODEL.ts, alone and followed by torch::jit::optimize_for_inference
// ("ts_opt": the peer of "tuned") (torch.jit.trace + save of the same model: pt2rt_bench's
// <work-dir>/<model>.pt2 and <model>_eval.ts), interleaved, minimum of N rounds after one
// warm-up round (measure.h), and the ratios. pt2rt_bench measures the same inside a process
// that embeds Python torch, whose import registers Python Meta kernels (torch._decomp) that
// the load's meta-device check then calls; this program shows the load as a C++ deployment
// sees it. --profile repeats one kind of load N times and prints nothing (for perf record /
// callgrind). Not a test: it prints figures.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "measure.h"
#include "pt2rt/model.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: pt2rt_bench_load MODEL.pt2 MODEL.ts [--rounds N] [--clock cpu|wall]\n");
    return 2;
  }
  const std::string pt2 = argv[1], ts = argv[2];
  int rounds = 7;
  auto clock = pt2rt::bench::Clock::ThreadCpu;
  std::string profile;
  for (int i = 3; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--clock"))
      clock = std::strcmp(argv[i + 1], "wall") ? pt2rt::bench::Clock::ThreadCpu : pt2rt::bench::Clock::Wall;
    else if (!std::strcmp(argv[i], "--profile")) profile = argv[i + 1];
  }
  at::set_num_threads(1);
  pt2rt::LoadOptions mapped, serving, tuned;
  mapped.map_weights = true;
  serving.map_weights = true;
  serving.inference_only = true;
  tuned = serving;
  tuned.onednn_benchmark = true;
  const std::vector<std::function<void()>> loads = {
      [&] { pt2rt::Model m = pt2rt::Model::load(pt2); },
      [&] { pt2rt::Model m = pt2rt::Model::load(pt2, c10::kCPU, mapped); },
      [&] { pt2rt::Model m = pt2rt::Model::load(pt2, c10::kCPU, serving); },
      [&] { pt2rt::Model m = pt2rt::Model::load(pt2, c10::kCPU, tuned); },
      [&] { torch::jit::Module m = torch::jit::load(ts); },
      [&] {
        torch::jit::Module m = torch::jit::load(ts);
        m.eval();
        m = torch::jit::optimize_for_inference(m);
      }};
  if (!profile.empty()) {
    const char* names[] = {"read", "mapped", "serving", "tuned", "ts", "ts_opt"};
    size_t k = 0;
    while (k < loads.size() && profile != names[k]) ++k;
    if (k == loads.size()) {
      std::fprintf(stderr, "pt2rt_bench_load: --profile must be read, mapped, serving, tuned, ts or ts_opt\n");
      return 2;
    }
    for (int i = 0; i < rounds; ++i) loads[k]();
    return 0;
  }
  const std::vector<double> t = pt2rt::bench::interleaved_min(loads, rounds, 1, clock);
  std::printf("read %.2f ms  mapped %.2f ms  mapped+inference_only %.2f ms  +onednn_benchmark "
              "%.2f ms  ts %.2f ms  ts+optimize_for_inference %.2f ms  read/ts %.2f  mapped/ts "
              "%.2f  mapped+inference_only/ts %.3f  tuned/ts_opt %.2f  (%s, min of %d)\n",
              t[0] * 1e3, t[1] * 1e3, t[2] * 1e3, t[3] * 1e3, t[4] * 1e3, t[5] * 1e3,
              t[0] / t[4], t[1] / t[4], t[2] / t[4], t[3] / t[5],
              clock == pt2rt::bench::Clock::Wall ? "wall" : "thread CPU", rounds);
  return 0;
}
