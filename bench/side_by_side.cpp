// bench/side_by_side.cpp — pt2rt_bench: pt2rt next to TorchScript (C++, unfrozen and frozen)
// and eager PyTorch (Python embedded in this process), on the same models, in one run.
//
//   pt2rt_bench [--models a,b,...] [--rounds N] [--warmup N] [--threads N] [--export-reps N]
//               [--work-dir DIR] [--set-to-none] [--no-min-cut]
//
// For each model (bench/bench_models.py), the embedded interpreter exports the pt2rt
// archives and the TorchScript traces (timing export + save against torch.jit.trace + save),
// then, interleaved (one call of every contender per round, minimum kept; measure.h):
//   inference       pt2rt, pt2rt with BatchNorm folded (optimize_inference; loaded
//                   inference_only, as a deployment; "tuned": also LoadOptions::onednn_benchmark),
//                   TorchScript, frozen TorchScript (torch::jit::freeze), TorchScript
//                   optimized for inference (torch::jit::optimize_for_inference), eager — min
//                   per call
//   training step   pt2rt (default partitioner), pt2rt (min-cut), TorchScript, eager
//   peak memory     of one training step, bytes above the step's start (counting allocator;
//                   the largest of 3 steps) and minor page faults per step (the fewest)
//   load            Model::load of the default archive, read, memory-mapped
//                   (LoadOptions::map_weights) and memory-mapped for serving
//                   (+ LoadOptions::inference_only), vs torch::jit::load of the trace
// and prints every figure with the pt2rt ÷ peer ratios. Intra-op threads: 1 (--threads).
// Not a test: it prints figures. docs/performance.md has the current figures.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "counting_allocator.h"
#include "list_option.h"
#include "measure.h"
#include "python_bridge.h"
#include "workload.h"

using namespace pt2rt::bench;
using json = nlohmann::json;

namespace {

struct Options {
  std::vector<std::string> models;
  int rounds = 30;
  int warmup = 3;
  int threads = 1;
  int export_reps = 1;
  std::string work_dir = "pt2rt-bench-work";
  bool set_to_none = false;
  bool min_cut = true;
  double budget_s = 20;  // per model and measurement kind: rounds are cut to fit
  Clock clock = Clock::ThreadCpu;
};

[[noreturn]] void usage(int code) {
  std::printf(
      "usage: pt2rt_bench [--models a,b,...] [--rounds N] [--warmup N] [--threads N]\n"
      "                   [--export-reps N] [--work-dir DIR] [--budget SECONDS]\n"
      "                   [--set-to-none] [--no-min-cut] [--clock cpu|wall]\n"
      "models: mlp_b1 mlp_b32 digits_cnn resnet18_b1 resnet18_b8 mobilenet_v2 transformer\n"
      "        resnet18_b8_fc (training only fc), resnet50_load (load times only)\n");
  std::exit(code);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    if (a == "--models") o.models = comma_list(value());
    else if (a == "--rounds") o.rounds = std::stoi(value());
    else if (a == "--warmup") o.warmup = std::stoi(value());
    else if (a == "--threads") o.threads = std::stoi(value());
    else if (a == "--export-reps") o.export_reps = std::stoi(value());
    else if (a == "--work-dir") o.work_dir = value();
    else if (a == "--budget") o.budget_s = std::stod(value());
    else if (a == "--set-to-none") o.set_to_none = true;
    else if (a == "--clock") {
      const std::string c = value();
      if (c == "cpu") o.clock = Clock::ThreadCpu;
      else if (c == "wall") o.clock = Clock::Wall;
      else usage(2);
    }
    else if (a == "--no-min-cut") o.min_cut = false;
    else if (a == "-h" || a == "--help") usage(0);
    else usage(2);
  }
  if (o.models.empty()) {
    o.models = {"mlp_b1",       "mlp_b32",     "digits_cnn",     "resnet18_b1",  "resnet18_b8",
                "resnet18_b8_fc", "mobilenet_v2", "transformer", "resnet50_load"};
  }
  return o;
}

/// One contender's figure, or why there is none.
struct Cell {
  std::optional<double> value;
  std::string missing;
};

/// Contender name → figure, per model, per measurement.
using Row = std::map<std::string, Cell>;

struct Results {
  std::vector<std::string> models;
  std::map<std::string, Row> inference, training, memory, faults, load, exports;
};

Workload make_workload(const json& info, bool set_to_none) {
  Workload w;
  at::manual_seed(0);
  for (const auto& shape : info["inputs"]) {
    w.inputs.push_back(at::randn(shape.get<std::vector<int64_t>>()));
  }
  w.loss = info["loss"].get<std::string>();
  if (w.loss == "ce") {
    const int64_t n = info["inputs"][0][0].get<int64_t>();
    w.target = at::randint(info["classes"].get<int64_t>(), {n}, at::kLong);
  }
  w.set_to_none = set_to_none;
  w.trainable_prefix = info["trainable_prefix"].get<std::string>();
  return w;
}

std::string artifact(const json& info, const std::string& key) {
  return info.contains(key) ? info[key].get<std::string>() : std::string();
}

std::string why_missing(const json& info, const std::string& key) {
  const json& errs = info["errors"];
  return errs.contains(key) ? errs[key].get<std::string>() : "not exported";
}

/// Builds the contenders that can be built; the others get their reason in `row`.
struct Lineup {
  std::vector<std::string> names;
  std::vector<Call> calls;
  void add(Row& row, const std::string& name, const std::function<Call()>& make,
           const std::string& unavailable = "") {
    if (!unavailable.empty()) {
      row[name].missing = unavailable;
      return;
    }
    try {
      calls.push_back(make());
      names.push_back(name);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      row[name].missing = msg.substr(0, msg.find('\n'));
    }
  }
};

/// Runs every contender once (an error drops it with its message), then times them.
void time_lineup(Lineup& l, Row& row, const Options& o) {
  Lineup ok;
  std::vector<double> probe;
  for (size_t i = 0; i < l.calls.size(); ++i) {
    try {
      auto t = interleaved_min({l.calls[i]}, 1, 1);
      probe.push_back(t[0]);
      ok.names.push_back(l.names[i]);
      ok.calls.push_back(l.calls[i]);
    } catch (const std::exception& e) {
      std::string msg = e.what();
      row[l.names[i]].missing = msg.substr(0, msg.find('\n'));
    }
  }
  if (ok.calls.empty()) return;
  double per_round = 0;
  for (double t : probe) per_round += t;
  int rounds = o.rounds;
  if (per_round * rounds > o.budget_s) rounds = std::max(3, static_cast<int>(o.budget_s / per_round));
  int warmup = std::min(o.warmup, std::max(1, rounds / 3));
  std::vector<double> t = interleaved_min(ok.calls, rounds, warmup, o.clock);
  for (size_t i = 0; i < t.size(); ++i) row[ok.names[i]].value = t[i];
  l = std::move(ok);
}

void measure_memory(const Lineup& training, Row& memory, Row& faults) {
  CountingAllocator& alloc = CountingAllocator::install();
  for (size_t i = 0; i < training.calls.size(); ++i) {
    const Call& step = training.calls[i];
    step();
    step();  // every tensor a step keeps (grads) is now allocated through the counter
    // Peak: the largest of the steps. Faults: the fewest of the steps, as times are minima —
    // a heap trim of the process (glibc returning freed memory) lands on whichever step runs
    // then, while a step that faults by itself faults every time.
    int64_t peak = 0, faults_min = -1;
    constexpr int kSteps = 3;
    for (int k = 0; k < kSteps; ++k) {
      const int64_t f0 = minor_page_faults();
      peak = std::max(peak, peak_above_start(alloc, step));
      const int64_t f = minor_page_faults() - f0;
      faults_min = faults_min < 0 ? f : std::min(faults_min, f);
    }
    memory[training.names[i]].value = static_cast<double>(peak);
    faults[training.names[i]].value = static_cast<double>(faults_min);
  }
  CountingAllocator::uninstall();
}

void run_model(const std::string& name, Python& py, const Options& o, Results& r) {
  std::fprintf(stderr, "[%s] exporting (pt2rt, TorchScript)...\n", name.c_str());
  const bool load_only = name == "resnet50_load";
  const bool train_only = name == "resnet18_b8_fc";  // a variant: shares resnet18_b8's files
  json opts = {{"export_reps", o.export_reps},
               {"clock", o.clock == Clock::Wall ? "wall" : "cpu"}};
  opts["artifacts"] = load_only || train_only ? json::array({"pt2", "ts"})
                                : (o.min_cut ? json::array({"pt2", "min_cut", "fold", "ts"})
                                             : json::array({"pt2", "fold", "ts"}));
  const json info = json::parse(py.call_str("prepare", {name, o.work_dir, opts.dump()}));
  r.models.push_back(name);
  const Workload w = make_workload(info, o.set_to_none);
  const std::string pt2 = artifact(info, "pt2"), fold = artifact(info, "pt2_fold");
  const std::string min_cut = artifact(info, "pt2_min_cut");
  const std::string ts_eval = artifact(info, "ts_eval"), ts_train = artifact(info, "ts_train");

  if (!train_only) {
    auto& ex = r.exports[name];
    if (info.contains("export_s")) ex["pt2rt"].value = info["export_s"].get<double>();
    else ex["pt2rt"].missing = why_missing(info, "pt2");
    if (info.contains("trace_s")) ex["ts"].value = info["trace_s"].get<double>();
    else ex["ts"].missing = why_missing(info, "ts_eval");
  }

  if (!train_only) {
    std::fprintf(stderr, "[%s] load...\n", name.c_str());
    Lineup l;
    auto& row = r.load[name];
    l.add(row, "pt2rt", [&] { return pt2rt_load(pt2); }, pt2.empty() ? why_missing(info, "pt2") : "");
    l.add(row, "pt2rt_map", [&] { return pt2rt_load(pt2, /*map_weights=*/true); },
          pt2.empty() ? why_missing(info, "pt2") : "");
    l.add(row, "pt2rt_serve",
          [&] { return pt2rt_load(pt2, /*map_weights=*/true, /*inference_only=*/true); },
          pt2.empty() ? why_missing(info, "pt2") : "");
    l.add(row, "ts", [&] { return torchscript_load(ts_eval); },
          ts_eval.empty() ? why_missing(info, "ts_eval") : "");
    Options lo = o;
    lo.rounds = std::max(5, o.rounds / 3);
    lo.warmup = 1;
    time_lineup(l, row, lo);
  }
  if (load_only) return;

  std::fprintf(stderr, "[%s] inference...\n", name.c_str());
  Python::Callable eager_infer, eager_step;
  try {
    std::tie(eager_infer, eager_step) = py.eager_runner(name, o.set_to_none);
  } catch (const std::exception& e) {
    r.inference[name]["eager"].missing = r.training[name]["eager"].missing = e.what();
  }
  if (!train_only) {
    Lineup l;
    auto& row = r.inference[name];
    l.add(row, "pt2rt", [&] { return pt2rt_inference(pt2, w); }, pt2.empty() ? why_missing(info, "pt2") : "");
    // The folded archive as a deployment loads it (inference_only), against frozen TorchScript.
    l.add(row, "pt2rt_fold", [&] { return pt2rt_inference(fold, w, /*inference_only=*/true); },
          fold.empty() ? why_missing(info, "pt2_fold") : "");
    // ... and with each convolution and linear layer on the faster kernel, timed at load,
    // against TorchScript's own inference optimisation (which moves them to oneDNN).
    l.add(row, "pt2rt_tuned",
          [&] { return pt2rt_inference(fold, w, /*inference_only=*/true, /*onednn_benchmark=*/true); },
          fold.empty() ? why_missing(info, "pt2_fold") : "");
    l.add(row, "ts", [&] { return torchscript_inference(ts_eval, w, TorchScriptPrep::None); },
          ts_eval.empty() ? why_missing(info, "ts_eval") : "");
    l.add(row, "ts_frozen", [&] { return torchscript_inference(ts_eval, w, TorchScriptPrep::Freeze); },
          ts_eval.empty() ? why_missing(info, "ts_eval") : "");
    l.add(row, "ts_optimized",
          [&] { return torchscript_inference(ts_eval, w, TorchScriptPrep::OptimizeForInference); },
          ts_eval.empty() ? why_missing(info, "ts_eval") : "");
    if (eager_infer.valid()) l.add(row, "eager", [&] { return Call([eager_infer] { eager_infer(); }); });
    time_lineup(l, row, o);
  }
  std::fprintf(stderr, "[%s] training step...\n", name.c_str());
  {
    Lineup l;
    auto& row = r.training[name];
    l.add(row, "pt2rt", [&] { return pt2rt_training(pt2, w); }, pt2.empty() ? why_missing(info, "pt2") : "");
    if (o.min_cut) {
      l.add(row, "pt2rt_min_cut", [&] { return pt2rt_training(min_cut, w); },
            min_cut.empty() ? why_missing(info, "pt2_min_cut") : "");
    }
    l.add(row, "ts", [&] { return torchscript_training(ts_train, w); },
          ts_train.empty() ? why_missing(info, "ts_train") : "");
    if (eager_step.valid()) l.add(row, "eager", [&] { return Call([eager_step] { eager_step(); }); });
    time_lineup(l, row, o);
    std::fprintf(stderr, "[%s] peak training memory...\n", name.c_str());
    measure_memory(l, r.memory[name], r.faults[name]);
  }
}

// ---------------------------------------------------------------------------------------
// Printing

std::string fmt(const Cell* c, double scale, int prec) {
  if (!c || !c->value) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", prec, *c->value * scale);
  return buf;
}

std::string ratio(const Row& row, const std::string& a, const std::string& b) {
  auto ia = row.find(a), ib = row.find(b);
  if (ia == row.end() || ib == row.end() || !ia->second.value || !ib->second.value ||
      *ib->second.value <= 0) {
    return "n/a";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", *ia->second.value / *ib->second.value);
  return buf;
}

/// `s` right-aligned in `width` terminal columns (UTF-8: continuation bytes take none).
std::string pad(const std::string& s, size_t width) {
  size_t cols = 0;
  for (unsigned char ch : s) cols += (ch & 0xC0) != 0x80;
  return std::string(cols < width ? width - cols : 0, ' ') + s;
}

struct Column {
  std::string title;
  std::string a, b;  ///< b empty: the absolute figure of a; else a ÷ b
};

void print_table(const std::string& title, const std::string& unit, double scale, int prec,
                 const std::vector<std::string>& models, const std::map<std::string, Row>& rows,
                 const std::vector<Column>& cols) {
  std::printf("\n%s\n", title.c_str());
  std::printf("  %-13s", "model");
  for (const Column& c : cols) std::printf(" %s", pad(c.title, 11).c_str());
  std::printf("\n");
  std::vector<std::string> notes;
  for (const std::string& m : models) {
    auto it = rows.find(m);
    if (it == rows.end()) continue;
    std::printf("  %-13s", m.c_str());
    for (const Column& c : cols) {
      std::string s;
      if (c.b.empty()) {
        auto ci = it->second.find(c.a);
        s = fmt(ci == it->second.end() ? nullptr : &ci->second, scale, prec);
      } else {
        s = ratio(it->second, c.a, c.b);
      }
      std::printf(" %s", pad(s, 11).c_str());
    }
    std::printf("\n");
    for (const auto& [who, cell] : it->second) {
      if (!cell.value && !cell.missing.empty()) notes.push_back(m + " / " + who + ": " + cell.missing);
    }
  }
  if (!unit.empty()) std::printf("  (absolute figures in %s)\n", unit.c_str());
  for (const std::string& n : notes) std::printf("  n/a: %s\n", n.c_str());
}

void print_results(const Results& r, const Options& o) {
  print_table("Inference latency, min per call", "us", 1e6, 1, r.models, r.inference,
              {{"pt2rt", "pt2rt", ""}, {"fold", "pt2rt_fold", ""}, {"tuned", "pt2rt_tuned", ""},
               {"ts", "ts", ""}, {"ts_frozen", "ts_frozen", ""}, {"ts_opt", "ts_optimized", ""},
               {"eager", "eager", ""}, {"÷ts", "pt2rt", "ts"}, {"÷frozen", "pt2rt", "ts_frozen"},
               {"÷eager", "pt2rt", "eager"}, {"fold÷frozen", "pt2rt_fold", "ts_frozen"},
               {"tuned÷opt", "pt2rt_tuned", "ts_optimized"}});
  std::vector<Column> train_cols = {{"pt2rt", "pt2rt", ""}, {"ts", "ts", ""}, {"eager", "eager", ""},
                                    {"÷ts", "pt2rt", "ts"}, {"÷eager", "pt2rt", "eager"}};
  if (o.min_cut) {
    train_cols.insert(train_cols.begin() + 1, {"mincut", "pt2rt_min_cut", ""});
    train_cols.push_back({"mincut÷ts", "pt2rt_min_cut", "ts"});
    train_cols.push_back({"mincut÷eager", "pt2rt_min_cut", "eager"});
  }
  print_table(std::string("Training step (zero_grad") + (o.set_to_none ? "(set_to_none)" : "") +
                  ", forward, loss, backward, SGD), min per step",
              "ms", 1e3, 2, r.models, r.training, train_cols);
  std::vector<Column> mem_cols = {{"pt2rt", "pt2rt", ""}, {"ts", "ts", ""}, {"eager", "eager", ""},
                                  {"÷ts", "pt2rt", "ts"}, {"÷eager", "pt2rt", "eager"}};
  if (o.min_cut) {
    mem_cols.push_back({"mincut", "pt2rt_min_cut", ""});
    mem_cols.push_back({"mincut÷eager", "pt2rt_min_cut", "eager"});
  }
  print_table("Peak memory of a training step above its start", "MiB", 1.0 / (1 << 20), 2,
              r.models, r.memory, mem_cols);
  std::vector<Column> fault_cols = {{"pt2rt", "pt2rt", ""}, {"ts", "ts", ""}, {"eager", "eager", ""}};
  if (o.min_cut) fault_cols.push_back({"mincut", "pt2rt_min_cut", ""});
  print_table("Minor page faults per training step", "", 1, 0, r.models, r.faults, fault_cols);
  print_table("Load (Model::load of the default archive: read, memory-mapped "
              "(LoadOptions::map_weights), and memory-mapped + LoadOptions::inference_only "
              "(serve); vs torch::jit::load of the eval trace), min",
              "ms", 1e3, 2, r.models, r.load,
              {{"pt2rt", "pt2rt", ""}, {"mapped", "pt2rt_map", ""}, {"serve", "pt2rt_serve", ""},
               {"ts", "ts", ""}, {"÷ts", "pt2rt", "ts"}, {"mapped÷ts", "pt2rt_map", "ts"},
               {"serve÷ts", "pt2rt_serve", "ts"}});
  print_table("Export + save (pt2rt.export, train + inference graphs, bundled examples) vs "
              "torch.jit.trace + torch.jit.save, min",
              "s", 1, 2, r.models, r.exports,
              {{"pt2rt", "pt2rt", ""}, {"ts", "ts", ""}, {"÷ts", "pt2rt", "ts"}});
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  at::set_num_threads(o.threads);
  // The Python half (bench_models.py, which finds the exporter next to it in ../exporter);
  // PT2RT_BENCH_DIR points a build at another checkout's (e.g. to re-measure a baseline).
  const char* bench_dir = std::getenv("PT2RT_BENCH_DIR");
  Python py(bench_dir && *bench_dir ? bench_dir : PT2RT_BENCH_DIR);
  py.set_num_threads(o.threads);
  const json v = json::parse(py.call_str("versions", {}));
  std::printf("pt2rt_bench: torch %s (Python %s, embedded), %d intra-op thread(s), %s, "
              "times: %s\n",
              v["torch"].get<std::string>().c_str(), v["python"].get<std::string>().c_str(),
              at::get_num_threads(),
              o.set_to_none ? "zero_grad(set_to_none=True)" : "zero_grad(set_to_none=False)",
              o.clock == Clock::Wall ? "wall clock" : "thread CPU time (--clock wall for wall time)");
  Results r;
  for (const std::string& m : o.models) {
    try {
      run_model(m, py, o, r);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[%s] failed: %s\n", m.c_str(), e.what());
    }
  }
  print_results(r, o);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "pt2rt_bench: %s\n", e.what());
  return 1;
}
