// bench/cuda_side_by_side.cpp — pt2rt_bench_cuda: pt2rt next to eager PyTorch on the same
// GPU, in one process, on the same models and the very same input tensors, interleaved.
//
//   pt2rt_bench_cuda [--device cuda|cpu] [--models a,b,...] [--steps N] [--warmup N]
//                    [--work-dir DIR] [--json FILE] [--capture-device cpu|cuda]
//
// For each model (bench/cuda_models.py: digits_cnn mlp lstm resnet18 mobilenet_v2
// transformer), the embedded interpreter (python_bridge.h) exports
// `pt2rt.export(model, args, train=True)` with the model on --capture-device to
// <work-dir>/<name>.pt2, and builds eager PyTorch on --device from the same seeded weights and
// inputs. pt2rt runs the archive through its public C++ API — pt2rt::Model::load(path, device,
// options), one Model in eval() for inference and one in train() with torch::optim::SGD for
// training — on eager's input tensors (handed over without a copy, through DLPack). Every
// entry of variants() (a label and its pt2rt::LoadOptions) is a pt2rt contender of its own.
//
//   inference      pt2rt: Model::forward under c10::InferenceMode after Model::eval();
//                  eager: the module in eval mode under torch.inference_mode()
//   training step  zero_grad(set_to_none=True), forward, loss out.pow(2).mean() (out: the
//                  first output), backward, SGD(lr=0.01, momentum=0.9): pt2rt with
//                  torch::optim::SGD over Model::parameters(), eager with torch.optim.SGD
//   timing         one probe call of each contender (a failure drops it with its message),
//                  --warmup rounds, then --steps timed rounds; a round calls every contender
//                  once, the order rotated by one each round (bench/measure.h), each call
//                  followed by a device synchronize inside its timed span
//                  (torch::cuda::synchronize from <torch/cuda.h>, called on CUDA only) after
//                  one before the round, so every call starts on an idle device and ends when
//                  its kernels have; wall time (steady_clock), the MEDIAN per contender in ms
//   peak memory    one more training step of each contender: bytes above the step's start,
//                  from the statistics of the CUDA caching allocator that Python and LibTorch
//                  share in this process (torch.cuda.synchronize,
//                  torch.cuda.reset_peak_memory_stats and torch.cuda.memory_allocated before,
//                  torch.cuda.max_memory_allocated after; cuda_models.py; PyTorch docs, "CUDA
//                  semantics: Memory management"); pt2rt ÷ eager is printed; n/a on --device cpu
//   sanity         after the inference warm-up, pt2rt's first output against eager's: the max
//                  |difference| is printed, and MISMATCH when it exceeds 1e-3 × eager's max
//                  |value| (or the shapes differ, or NaN), so that the benchmark never silently
//                  times two different computations
//
// Both contenders run under the same global settings (one process, one
// at::globalContext()): the TF32 flags (torch.backends.cuda.matmul.allow_tf32,
// torch.backends.cudnn.allow_tf32) and torch.backends.cudnn.benchmark are printed in the
// header. Prints one row per model and pt2rt variant; --json writes every figure (the
// per-round times too). A model whose export, load or eager set-up fails prints its row with
// the one-line error and the run goes on; the exit status is then 1, as after a MISMATCH.
// Not a test: it prints figures.
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <cxxopts.hpp>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "list_option.h"
#include "measure.h"
#include "pt2rt/model.h"
#include "python_bridge.h"
#include "workload.h"

using namespace pt2rt::bench;
using json = nlohmann::json;

namespace {

constexpr double kMomentum = 0.9;   // SGD's; the learning rate is workload.h's kLearningRate
constexpr double kRelTol = 1e-3;    // the sanity check's bound, relative to eager's max |value|

/// A pt2rt contender: the archive loaded with these options.
struct Variant {
  std::string label;
  pt2rt::LoadOptions options;
};

/// The pt2rt contenders; a further one (e.g. a load option for CUDA graphs) is one more entry.
/// Run bounds off (RunLimits::kUnlimited, as `export-cli --trusted`): these are the benchmark's
/// own exports, and the bounds for untrusted archives scale with the archive's size, not with
/// the batch (a 32 × 3 × 224² training step needs more than they allow).
/// Where CUDA is available, "graphs" adds LoadOptions::cuda_graphs (inference calls, and the
/// training step's forward and backward, replayed from CUDA graphs; the loss and
/// torch::optim::SGD's step run as without).
std::vector<Variant> variants() {
  pt2rt::LoadOptions trusted;
  trusted.run.max_bytes = trusted.run.max_work = pt2rt::RunLimits::kUnlimited;
  std::vector<Variant> vs = {{"pt2rt", trusted}};
  if (torch::cuda::is_available()) {
    pt2rt::LoadOptions graphs = trusted;
    graphs.cuda_graphs = true;
    vs.push_back({"graphs", graphs});
  }
  return vs;
}

struct Options {
  std::string device = "cuda";
  std::vector<std::string> models = {"digits_cnn", "mlp",          "lstm",
                                     "resnet18",   "mobilenet_v2", "transformer"};
  int steps = 10;
  int warmup = 3;
  std::string work_dir = "pt2rt-bench-cuda-work";
  std::string json_path;
  std::string capture_device = "cpu";
  bool profile = false;  ///< print a torch.profiler table of one step + one inference each
};

/// The command line (cxxopts, as export-cli). Exits 0 after --help; 2 with a one-line error
/// on an unknown option, a bad value, or a device other than cuda / cpu.
Options parse(int argc, char** argv) {
  Options o;
  cxxopts::Options spec("pt2rt_bench_cuda", "pt2rt vs eager PyTorch on one device");
  spec.add_options()
      ("device", "cuda or cpu", cxxopts::value<std::string>()->default_value(o.device))
      ("models", "comma-separated: digits_cnn mlp lstm resnet18 mobilenet_v2 transformer "
                 "(default); also lstm_unrolled (the LSTM exported as unrolled ATen cells, as "
                 "before one op)", cxxopts::value<std::string>())
      ("steps", "measured rounds", cxxopts::value<int>()->default_value(std::to_string(o.steps)))
      ("warmup", "rounds before measuring",
       cxxopts::value<int>()->default_value(std::to_string(o.warmup)))
      ("work-dir", "where the archives go", cxxopts::value<std::string>()->default_value(o.work_dir))
      ("json", "also write the figures to this file", cxxopts::value<std::string>())
      ("capture-device", "cpu or cuda: where the exporter captures",
       cxxopts::value<std::string>()->default_value(o.capture_device))
      ("profile", "print a torch.profiler table of one step + one inference each")
      ("h,help", "this text");
  try {
    const auto r = spec.parse(argc, argv);
    if (r.count("help")) {
      std::printf("%s", spec.help().c_str());
      std::exit(0);
    }
    if (!r.unmatched().empty()) {
      throw std::invalid_argument("unexpected argument '" + r.unmatched().front() + "'");
    }
    o.device = r["device"].as<std::string>();
    if (r.count("models")) o.models = comma_list(r["models"].as<std::string>());
    o.steps = r["steps"].as<int>();
    o.warmup = r["warmup"].as<int>();
    o.work_dir = r["work-dir"].as<std::string>();
    if (r.count("json")) o.json_path = r["json"].as<std::string>();
    o.capture_device = r["capture-device"].as<std::string>();
    o.profile = r.count("profile") > 0;
    const auto is_device = [](const std::string& d) { return d == "cuda" || d == "cpu"; };
    if (!is_device(o.device) || !is_device(o.capture_device)) {
      throw std::invalid_argument("--device and --capture-device take cuda or cpu");
    }
    if (o.steps < 1 || o.warmup < 0) {
      throw std::invalid_argument("--steps must be >= 1 and --warmup >= 0");
    }
  } catch (const std::exception& e) {  // cxxopts::exceptions::exception or the checks above
    std::fprintf(stderr, "pt2rt_bench_cuda: %s (--help lists the options)\n", e.what());
    std::exit(2);
  }
  return o;
}

/// An error in one line: its first; for a Python traceback (python_bridge.h), the first line
/// after the last stack frame (frames are indented): the exception's type and message.
std::string error_line(const std::string& s) {
  size_t start = 0;
  if (s.rfind("Traceback", 0) == 0) {
    for (size_t pos = 0; pos < s.size();) {
      const size_t next = s.find('\n', pos);
      if (next == std::string::npos) break;
      if (s[pos] == ' ') start = next + 1;
      pos = next + 1;
    }
  }
  const size_t end = s.find('\n', start);
  return s.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

/// One contender's calls on one model.
struct Contender {
  std::string label;
  Call infer;                           ///< one inference call
  Call step;                            ///< one training step
  std::function<at::Tensor()> output;   ///< the first output of one inference call
};

/// One contender's figures on one model (times in seconds, per timed round).
struct Figures {
  std::vector<double> infer_s, step_s;
  std::optional<double> peak_bytes;
  std::optional<double> max_abs_diff, max_abs_eager;  ///< pt2rt: the sanity check
  bool mismatch = false;
  std::string error;  ///< why figures are missing (load or a failing call)
};

struct ModelRun {
  std::string name;
  std::string error;  ///< export or eager set-up failed: no row of figures
  std::optional<double> export_s;
  Figures eager;
  std::vector<Figures> pt2rt;  ///< per variants() entry
};

/// pt2rt on `path`, loaded twice with `v.options`: in eval mode for inference, in train mode
/// with torch::optim::SGD(lr, momentum) over its parameters for the training step.
/// @throws what Model::load throws.
Contender pt2rt_contender(const std::string& path, c10::Device device, const Variant& v,
                          const std::vector<at::Tensor>& inputs) {
  auto eval_model = std::make_shared<pt2rt::Model>(pt2rt::Model::load(path, device, v.options));
  eval_model->eval();
  struct Training {
    pt2rt::Model model;
    std::vector<at::Tensor> params;
    torch::optim::SGD opt;
    Workload w;
  };
  pt2rt::Model m = pt2rt::Model::load(path, device, v.options);
  m.train();
  std::vector<at::Tensor> params = m.parameters();
  Workload w;
  w.inputs = inputs;
  w.loss = "mse";  // out.pow(2).mean()
  w.set_to_none = true;
  auto t = std::make_shared<Training>(Training{
      std::move(m), params,
      torch::optim::SGD(params, torch::optim::SGDOptions(kLearningRate).momentum(kMomentum)),
      std::move(w)});
  Contender c;
  c.label = v.label;
  c.infer = [eval_model, inputs] {
    c10::InferenceMode guard;
    eval_model->forward(inputs);
  };
  c.output = [eval_model, inputs] {
    c10::InferenceMode guard;
    return eval_model->forward(inputs).at(0);
  };
  c.step = [t] {
    zero_grads(t->params, t->w.set_to_none);
    // The outputs die with this statement, as eager's do in its one-line step (only the
    // loss's graph keeps what it saved): a temporary of the backward's statement would hold
    // the outputs through the backward's peak.
    at::Tensor loss = loss_of(t->model.forward(t->w.inputs).at(0), t->w);
    loss.backward();
    t->opt.step();
  };
  return c;
}

/// Eager PyTorch (cuda_models.EagerRunner) on `name`; `inputs` receives its input tensors.
Contender eager_contender(Python& py, const std::string& name, const Options& o,
                          std::vector<at::Tensor>& inputs) {
  const std::vector<Python::Callable> m =
      py.methods("runner", {name, o.device}, {"infer", "train_step", "infer_output", "inputs"});
  inputs = m[3].tensors();
  Contender c;
  c.label = "eager";
  c.infer = [f = m[0]] { f(); };
  c.step = [f = m[1]] { f(); };
  c.output = [f = m[2]] { return f.tensors().at(0); };
  return c;
}

/// Wall seconds of each call in each round (samples[i][r]): round r calls calls[r mod n]
/// first, then on in order; `sync` runs before each round and inside each call's timed span
/// right after it.
std::vector<std::vector<double>> timed_rounds(const std::vector<Call>& calls, int rounds,
                                              const Call& sync) {
  const size_t n = calls.size();
  std::vector<std::vector<double>> samples(n);
  for (int r = 0; r < rounds; ++r) {
    std::vector<Call> order;
    for (size_t k = 0; k < n; ++k) {
      const Call& call = calls[(k + static_cast<size_t>(r)) % n];
      order.push_back([&call, &sync] {
        call();
        sync();
      });
    }
    sync();
    // One round of measure.h's interleaved_min: each call's wall time, in `order`.
    const std::vector<double> t = interleaved_min(order, 1, 0, Clock::Wall);
    for (size_t k = 0; k < n; ++k) samples[(k + static_cast<size_t>(r)) % n].push_back(t[k]);
  }
  return samples;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The sanity check of `f` (pt2rt's first output `got`) against eager's `want`.
void compare(const at::Tensor& got, const at::Tensor& want, Figures& f) {
  c10::InferenceMode guard;
  if (!got.sizes().equals(want.sizes())) {
    f.mismatch = true;
    std::ostringstream os;
    os << "output shape " << got.sizes() << ", eager's " << want.sizes();
    f.error = os.str();
    return;
  }
  const at::Tensor g = got.to(at::kDouble), w = want.to(got.device(), at::kDouble);
  f.max_abs_diff = (g - w).abs().max().item<double>();
  f.max_abs_eager = w.abs().max().item<double>();
  f.mismatch = !(*f.max_abs_diff <= kRelTol * *f.max_abs_eager);  // NaN: a mismatch
}

/// The contenders' `calls` (infer or step), each probed once: a throwing one gets its error
/// in `figures` and is left out. Returns the indices of those that ran.
std::vector<size_t> probe(const std::vector<Call>& calls, std::vector<Figures*>& figures,
                          const Call& sync) {
  std::vector<size_t> ok;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (!figures[i]->error.empty()) continue;
    try {
      calls[i]();
      sync();
      ok.push_back(i);
    } catch (const std::exception& e) {
      figures[i]->error = error_line(e.what());
    }
  }
  return ok;
}

/// Probes, warms up and times `calls` (one per contender); the samples go to `field`.
void time_calls(const std::vector<Call>& calls, std::vector<Figures*>& figures,
                std::vector<double> Figures::*field, const Options& o, const Call& sync,
                const std::function<void()>& after_warmup = {}) {
  const std::vector<size_t> ok = probe(calls, figures, sync);
  std::vector<Call> running;
  for (size_t i : ok) running.push_back(calls[i]);
  if (running.empty()) return;
  timed_rounds(running, o.warmup, sync);
  if (after_warmup) after_warmup();
  const auto samples = timed_rounds(running, o.steps, sync);
  for (size_t k = 0; k < ok.size(); ++k) figures[ok[k]]->*field = samples[k];
}

ModelRun run_model(const std::string& name, Python& py, const Options& o) {
  ModelRun r;
  r.name = name;
  const std::vector<Variant> vs = variants();
  r.pt2rt.resize(vs.size());
  std::fprintf(stderr, "[%s] exporting (capture on %s)...\n", name.c_str(),
               o.capture_device.c_str());
  const json info =
      json::parse(py.call_str("prepare", {name, o.work_dir, o.capture_device}));
  if (info.contains("error")) {
    r.error = "export: " + info["error"].get<std::string>();
    return r;
  }
  r.export_s = info["export_s"].get<double>();
  const std::string pt2 = info["pt2"].get<std::string>();
  std::fprintf(stderr, "[%s] exported in %.1f s\n", name.c_str(), *r.export_s);

  std::fprintf(stderr, "[%s] loading...\n", name.c_str());
  std::vector<at::Tensor> inputs;
  std::vector<Contender> contenders;
  try {
    contenders.push_back(eager_contender(py, name, o, inputs));
  } catch (const std::exception& e) {
    r.error = "eager: " + error_line(e.what());
    return r;
  }
  std::vector<Figures*> figures = {&r.eager};
  const c10::Device device(o.device);
  for (size_t v = 0; v < vs.size(); ++v) {
    try {
      contenders.push_back(pt2rt_contender(pt2, device, vs[v], inputs));
      figures.push_back(&r.pt2rt[v]);
    } catch (const std::exception& e) {
      r.pt2rt[v].error = "load: " + error_line(e.what());
    }
  }
  if (contenders.size() == 1) return r;  // no pt2rt contender loaded: nothing to compare
  const Call sync = device.is_cuda() ? Call([] { torch::cuda::synchronize(); }) : Call([] {});

  std::fprintf(stderr, "[%s] inference...\n", name.c_str());
  std::vector<Call> infer, step;
  for (const Contender& c : contenders) {
    infer.push_back(c.infer);
    step.push_back(c.step);
  }
  time_calls(infer, figures, &Figures::infer_s, o, sync, [&] {
    if (!r.eager.error.empty()) return;
    const at::Tensor want = contenders[0].output();
    for (size_t i = 1; i < contenders.size(); ++i) {
      if (figures[i]->error.empty()) compare(contenders[i].output(), want, *figures[i]);
    }
  });
  std::fprintf(stderr, "[%s] training step...\n", name.c_str());
  time_calls(step, figures, &Figures::step_s, o, sync);
  if (o.profile) {
    for (size_t i = 0; i < contenders.size(); ++i) {
      if (figures[i]->step_s.empty()) continue;
      try {
        py.call_str("profile_begin", {o.device});
        contenders[i].step();
        contenders[i].infer();
        std::printf("%s\n", py.call_str("profile_end", {name + " " + contenders[i].label,
                                                         o.device}).c_str());
      } catch (const std::exception& e) {
        std::printf("profile of %s failed: %s\n", contenders[i].label.c_str(),
                    error_line(e.what()).c_str());
      }
    }
    std::fflush(stdout);
  }
  if (device.is_cuda()) {
    std::fprintf(stderr, "[%s] peak memory of a training step...\n", name.c_str());
    for (size_t i = 0; i < contenders.size(); ++i) {
      if (figures[i]->step_s.empty()) continue;
      try {
        py.call_str("memory_begin", {o.device});
        contenders[i].step();
        figures[i]->peak_bytes = std::stod(py.call_str("memory_peak", {o.device}));
      } catch (const std::exception& e) {
        figures[i]->error = "peak memory: " + error_line(e.what());
      }
    }
  }
  return r;
}

// ---------------------------------------------------------------------------------------
// Printing

std::optional<double> median_ms(const std::vector<double>& s) {
  if (s.empty()) return std::nullopt;
  return 1e3 * median(s);
}

std::optional<double> ratio(std::optional<double> a, std::optional<double> b) {
  if (!a || !b || *b <= 0) return std::nullopt;
  return *a / *b;
}

std::string fmt(std::optional<double> v, const char* format) {
  if (!v) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, *v);
  return buf;
}

const std::vector<std::string> kColumns = {"step_ms",     "eager_step_ms", "step/eager",
                                           "infer_ms",    "eager_infer_ms", "infer/eager",
                                           "peak/eager",  "max_abs_diff"};

std::string row_name(const ModelRun& r, const Variant& v) {
  return v.label == "pt2rt" ? r.name : r.name + "[" + v.label + "]";
}

/// Prints `r`'s rows; returns false when it failed (an error or a mismatch).
bool print_rows(const ModelRun& r) {
  const std::vector<Variant> vs = variants();
  bool ok = true;
  for (size_t v = 0; v < vs.size(); ++v) {
    std::printf("%-16s", row_name(r, vs[v]).c_str());
    if (!r.error.empty()) {
      std::printf("  FAILED: %s\n", r.error.c_str());
      ok = false;
      continue;
    }
    const Figures& p = r.pt2rt[v];
    const Figures& e = r.eager;
    const std::vector<std::string> cells = {
        fmt(median_ms(p.step_s), "%.3f"),
        fmt(median_ms(e.step_s), "%.3f"),
        fmt(ratio(median_ms(p.step_s), median_ms(e.step_s)), "%.2f"),
        fmt(median_ms(p.infer_s), "%.3f"),
        fmt(median_ms(e.infer_s), "%.3f"),
        fmt(ratio(median_ms(p.infer_s), median_ms(e.infer_s)), "%.2f"),
        fmt(ratio(p.peak_bytes, e.peak_bytes), "%.2f"),
        fmt(p.max_abs_diff, "%.2e")};
    for (size_t c = 0; c < cells.size(); ++c) {
      std::printf(" %*s", static_cast<int>(std::max<size_t>(kColumns[c].size(), 8)),
                  cells[c].c_str());
    }
    if (p.mismatch) {
      std::printf("  MISMATCH");
      ok = false;
    }
    if (!p.error.empty()) {
      std::printf("  %s: %s", vs[v].label.c_str(), p.error.c_str());
      ok = false;
    }
    if (!e.error.empty()) {
      std::printf("  eager: %s", e.error.c_str());
      ok = false;
    }
    std::printf("\n");
    if (p.mismatch && p.max_abs_diff) {
      std::printf("!!! MISMATCH %s: max |%s - eager| = %.3e > %.0e x max |eager| (%.3e): the "
                  "two contenders do not compute the same thing\n",
                  row_name(r, vs[v]).c_str(), vs[v].label.c_str(), *p.max_abs_diff, kRelTol,
                  *p.max_abs_eager);
    }
  }
  return ok;
}

json optional_json(std::optional<double> v) { return v ? json(*v) : json(); }

json figures_json(const Figures& f) {
  json j = {{"step_ms", optional_json(median_ms(f.step_s))},
            {"infer_ms", optional_json(median_ms(f.infer_s))},
            {"peak_bytes", optional_json(f.peak_bytes)},
            {"max_abs_diff", optional_json(f.max_abs_diff)},
            {"max_abs_eager", optional_json(f.max_abs_eager)},
            {"mismatch", f.mismatch},
            {"error", f.error.empty() ? json() : json(f.error)}};
  std::vector<double> step_ms, infer_ms;
  for (double s : f.step_s) step_ms.push_back(1e3 * s);
  for (double s : f.infer_s) infer_ms.push_back(1e3 * s);
  j["step_ms_rounds"] = step_ms;
  j["infer_ms_rounds"] = infer_ms;
  return j;
}

json run_json(const ModelRun& r) {
  json j = {{"model", r.name},
            {"error", r.error.empty() ? json() : json(r.error)},
            {"export_s", optional_json(r.export_s)}};
  if (!r.error.empty()) return j;
  const Figures& e = r.eager;
  j["eager"] = figures_json(e);
  const std::vector<Variant> vs = variants();
  for (size_t v = 0; v < vs.size(); ++v) {
    const Figures& p = r.pt2rt[v];
    json pj = figures_json(p);
    pj["step/eager"] = optional_json(ratio(median_ms(p.step_s), median_ms(e.step_s)));
    pj["infer/eager"] = optional_json(ratio(median_ms(p.infer_s), median_ms(e.infer_s)));
    pj["peak/eager"] = optional_json(ratio(p.peak_bytes, e.peak_bytes));
    j["pt2rt"][vs[v].label] = pj;
  }
  return j;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  if (o.device == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "pt2rt_bench_cuda: no CUDA device (or a LibTorch without CUDA); "
                         "--device cpu runs the benchmark on the CPU\n");
    return 2;
  }
  // The Python half (cuda_models.py, which imports bench_models.py beside it);
  // PT2RT_BENCH_DIR points a build at another checkout's.
  const char* bench_dir = std::getenv("PT2RT_BENCH_DIR");
  Python py(bench_dir && *bench_dir ? bench_dir : PT2RT_BENCH_DIR, "cuda_models");
  const json h = json::parse(py.call_str("header", {o.device}));
  std::printf("pt2rt_bench_cuda: torch %s (Python %s, embedded), device %s (%s), TF32 matmul %s "
              "cudnn %s, cudnn.benchmark %s; captured on %s; median of %d rounds after %d "
              "warm-up\n",
              h["torch"].get<std::string>().c_str(), h["python"].get<std::string>().c_str(),
              o.device.c_str(), h["device_name"].get<std::string>().c_str(),
              h["tf32_matmul"].get<bool>() ? "on" : "off",
              h["tf32_cudnn"].get<bool>() ? "on" : "off",
              h["cudnn_benchmark"].get<bool>() ? "on" : "off", o.capture_device.c_str(),
              o.steps, o.warmup);
  std::fflush(stdout);  // before the progress lines on stderr
  std::vector<ModelRun> runs;
  for (const std::string& m : o.models) {
    try {
      runs.push_back(run_model(m, py, o));
    } catch (const std::exception& e) {
      ModelRun r;
      r.name = m;
      r.error = error_line(e.what());
      r.pt2rt.resize(variants().size());
      runs.push_back(std::move(r));
    }
    if (!runs.back().error.empty()) {
      std::fprintf(stderr, "[%s] failed: %s\n", m.c_str(), runs.back().error.c_str());
    }
  }
  std::printf("%-16s", "model");
  for (const std::string& c : kColumns) {
    std::printf(" %*s", static_cast<int>(std::max<size_t>(c.size(), 8)), c.c_str());
  }
  std::printf("\n");
  bool ok = true;
  for (const ModelRun& r : runs) ok = print_rows(r) && ok;
  std::printf("(times: median wall ms per call, synchronized; peak: training-step bytes above "
              "its start; max_abs_diff: inference output, pt2rt vs eager)\n");
  if (!o.json_path.empty()) {
    json j = {{"header", h},
              {"options",
               {{"device", o.device},
                {"capture_device", o.capture_device},
                {"steps", o.steps},
                {"warmup", o.warmup}}}};
    j["models"] = json::array();
    for (const ModelRun& r : runs) j["models"].push_back(run_json(r));
    std::ofstream out(o.json_path);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "pt2rt_bench_cuda: cannot write %s\n", o.json_path.c_str());
      ok = false;
    }
  }
  return ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "pt2rt_bench_cuda: %s\n", e.what());
  return 1;
}
