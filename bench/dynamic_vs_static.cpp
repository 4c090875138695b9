// bench/dynamic_vs_static.cpp — per-call cost of dynamic shapes: a dynamic-batch archive vs
// the static archive of the same model, at the same shape, in one run.
//
//   pt2rt_bench_dynamic STATIC.pt2 DYNAMIC.pt2 [--iters K] [--train]
//
// Both archives are made by bench/export_dynamic_pair.py (torch >= 2.9: MLP batch 1,
// resnet18 batch 8). The input is zeros of the static archive's input 0 shape; both models run
// it K times interleaved (a busy machine slows both alike) after warm-up, on one thread, in
// eval mode (inference plan) or with --train (training forward + backward). Prints the minimum
// and median per call and the ratio dynamic / static (target <= 1.05).
//
// A third model is the dynamic archive loaded with LoadOptions::run.max_bytes at the smallest
// value with which it loads and runs the benchmark's call (found by bisection: the peak
// bytes of that call, eval or --train, at the benchmark shape), so that it is over the bound
// at the range maximum and every call is bounded at its own sizes (runtime/model/call_bounds.h):
// its ratio to static is the cost of that per-call check (a cached cell).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "pt2rt/errors.h"
#include "pt2rt/model.h"

using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s STATIC.pt2 DYNAMIC.pt2 [--iters K] [--train]\n", argv[0]);
    return 2;
  }
  int iters = 200;
  bool train = false;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--train")) train = true;
  }
  at::set_num_threads(1);
  pt2rt::Model fixed = pt2rt::Model::load(argv[1], at::kCPU);
  pt2rt::Model dyn = pt2rt::Model::load(argv[2], at::kCPU);
  const pt2rt::Graph* g = fixed.program().graph(pt2rt::GraphRole::Inference);
  if (g == nullptr) g = fixed.program().graph(pt2rt::GraphRole::Forward);
  std::vector<int64_t> shape;
  for (const auto& in : g->inputs) {
    if (in.descriptor.kind != pt2rt::InputKind::Plain) continue;
    for (const auto& d : g->values[in.value].meta->sizes) shape.push_back(d.value);
    break;
  }
  const at::Tensor x = at::randn(shape);

  auto call = [&](pt2rt::Model& m, const at::Tensor& input) {
    if (train) {
      m.train();
      at::Tensor out = m.forward({input})[0];
      out.sum().backward();
    } else {
      m.eval();
      c10::InferenceMode guard;
      m.forward({input});
    }
  };
  // The per-call-checked copy: the smallest max_bytes with which it loads and runs the
  // benchmark's call (bisection; with --train the training graphs' bytes at the benchmark
  // shape decide, which exceed the inference ones).
  pt2rt::LoadOptions checked_options;
  uint64_t lo = 0, hi = uint64_t{1} << 40;  // lo: refused, hi: loads and runs
  while (hi - lo > 1) {
    checked_options.run.max_bytes = lo + (hi - lo) / 2;
    try {
      pt2rt::Model probe = pt2rt::Model::load(argv[2], at::kCPU, checked_options);
      call(probe, x);
      hi = checked_options.run.max_bytes;
    } catch (const pt2rt::FormatError&) {  // over the bound at the range minima
      lo = checked_options.run.max_bytes;
    } catch (const pt2rt::InputError&) {   // over the bound at the benchmark shape
      lo = checked_options.run.max_bytes;
    }
  }
  checked_options.run.max_bytes = hi;
  pt2rt::Model checked = pt2rt::Model::load(argv[2], at::kCPU, checked_options);
  std::string check_state = "not needed (the archive is within the bound at its range maximum)";
  for (const pt2rt::RangeConstraint& rc : checked.program().range_constraints) {
    std::vector<int64_t> at_max = shape;
    at_max[0] = rc.max;  // the benchmark archives' symbol is input 0's batch dim
    try {
      call(checked, at::zeros(at_max));
    } catch (const pt2rt::InputError&) {
      check_state = "on (a call at batch " + std::to_string(rc.max) + " is refused)";
    }
  }
  std::vector<std::function<void()>> fns = {[&] { call(fixed, x); }, [&] { call(dyn, x); },
                                            [&] { call(checked, x); }};
  std::vector<std::vector<double>> ns(fns.size());
  for (int r = 0; r < iters / 10 + 1; ++r) for (auto& f : fns) f();
  for (int r = 0; r < iters; ++r) {
    for (size_t k = 0; k < fns.size(); ++k) {
      const auto t0 = Clock::now();
      fns[k]();
      ns[k].push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
    }
  }
  double mins[3], meds[3];
  for (size_t k = 0; k < fns.size(); ++k) {
    std::sort(ns[k].begin(), ns[k].end());
    mins[k] = ns[k].front();
    meds[k] = ns[k][ns[k].size() / 2];
  }
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  s += "]";
  std::printf("%s input %s, %s, %d calls each (interleaved, 1 thread)\n", argv[1], s.c_str(),
              train ? "training forward+backward" : "inference", iters);
  std::printf("  static : min %10.1f us  median %10.1f us\n", mins[0] / 1e3, meds[0] / 1e3);
  std::printf("  dynamic: min %10.1f us  median %10.1f us\n", mins[1] / 1e3, meds[1] / 1e3);
  std::printf("  dynamic, per-call bound check (max_bytes %llu, check %s):\n"
              "           min %10.1f us  median %10.1f us\n",
              static_cast<unsigned long long>(hi), check_state.c_str(), mins[2] / 1e3,
              meds[2] / 1e3);
  std::printf("  ratio dynamic/static: min %.3f  median %.3f  (target <= 1.05)\n",
              mins[1] / mins[0], meds[1] / meds[0]);
  std::printf("  ratio dynamic with per-call check/static: min %.3f  median %.3f\n",
              mins[2] / mins[0], meds[2] / meds[0]);
  return 0;
}
catch (const std::exception& e) {  // pt2rt::Error and c10::Error: one line, exit 1
  std::fprintf(stderr, "pt2rt_bench_dynamic: %s\n", e.what());
  return 1;
}
