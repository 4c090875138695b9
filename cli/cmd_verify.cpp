// export-cli verify — self-check an archive on this machine against the eager references
// bundled at export: every example through inference and through training forward +
// backward; outputs, parameter gradients and updated buffers compared with
// torch.testing.assert_close's default tolerances for their dtype (or --rtol/--atol).
// Gradients bundled as sketches (the default since schema 1.2) are checked by
// pt2rt/grad_sketch.h's rule. A result outside the tolerance still passes by the float64 rule
// (schema 1.5 archives: schema/README.md "The float64 rule", torch._dynamo.utils.same's
// fp64_ref rule) when it is about as close to eager PyTorch's float64 result as eager
// float32 is — how another device or LibTorch rounds is judged against eager's own rounding.
//
// TF32 (CUDA): the references are full float32, so verify turns TF32 off for cuDNN and cuBLAS
// while it runs (at::Context::setAllowTF32CuDNN / setAllowTF32CuBLAS), unless --allow-tf32;
// it prints which. Cross-device (references computed on the CPU, verifying on CUDA, or the
// other way round: Producer::capture_device, schema 1.5): the floating tolerances are at
// least PyTorch's own CPU-vs-CUDA ones (rtol = atol = 1e-3, test_ops.py test_compare_cpu) —
// cuDNN's convolution algorithms round differently from the CPU's by more than float32's
// defaults (resnet18's gradients: ~1e-4 relative) — unless --rtol/--atol.
//
// Threads (CPU): ATen's kernels choose algorithms by the intra-op thread count, and some
// differ by more than rounding; verify runs with the count the references were computed with
// (metadata "reference_threads"), unless --threads (verify_threads.h), and says which.
//
// State: the references ran every call on fresh copies of the example inputs and of the
// exported buffers, so verify does too — a forward that mutates an input in place, or
// updates a buffer in eval mode (a cache, a step counter), would otherwise feed the next
// run another input or state than the references had.
//
//   export-cli verify <model.pt2> [--device cpu|cuda] [--rtol R] [--atol A] [--allow-tf32]
//                     [--threads N] [--allow-no-examples] [--quiet]
//
// Randomness (pt2rt/randomness.h): before each run the default generator is seeded with the
// seed the exporter used for the eager references, so a model with dropout draws the same
// masks and matches exactly on the LibTorch that exported it. Where that replay is not
// possible (another LibTorch version, a CUDA device, an archive without the seed, or one whose
// exporter found that its graphs draw in another order or amount than eager did — metadata
// "reference_draws", pt2rt/randomness.h), the results that depend on random draws are
// checked by dtype, shape and finite values instead, and verify says so.
//
// Exit 0 when everything is close, 1 when anything is not, or when the archive has no
// bundled examples (nothing verified) unless --allow-no-examples. An archive whose weights were
// re-saved (train --save, Model::save) keeps its example inputs but not the references:
// then the examples are run, outputs are checked against the signature (dtype, shape),
// and verify says there are no references and exits 0.
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "cli.h"
#include "compare.h"
#include "options.h"
#include <ATen/Context.h>

#include "pt2rt/grad_sketch.h"
#include "pt2rt/model.h"
#include "pt2rt/randomness.h"
#include "signature.h"
#include "steps.h"
#include "tensor_io.h"
#include "tf32_guard.h"
#include "verify_threads.h"

namespace pt2rt::cli {
namespace {

struct Row {
  std::string name;
  Comparison result;
};

/// A table cell: "-" where there is no number (signature checks).
std::string number(double v) {
  if (std::isnan(v)) return "-";
  std::ostringstream out;
  out << std::scientific << std::setprecision(3) << v;
  return out.str();
}

class Table {
 public:
  void add(std::string name, Comparison c) { rows_.push_back({std::move(name), std::move(c)}); }
  bool all_pass() const {
    for (const auto& r : rows_) {
      if (!r.result.pass) return false;
    }
    return true;
  }
  size_t failures() const {
    size_t n = 0;
    for (const auto& r : rows_) n += r.result.pass ? 0 : 1;
    return n;
  }
  size_t size() const { return rows_.size(); }
  size_t by_float64() const {
    size_t n = 0;
    for (const auto& r : rows_) n += r.result.pass && r.result.by_float64;
    return n;
  }
  /// Columns: the largest |actual - reference| and |actual - reference| / |reference| over
  /// the elements, or, for "(sketch)" rows, over the sketch's statistics (norm, sums, max_abs,
  /// projections; pt2rt/grad_sketch.h).
  void print(std::ostream& out, bool failures_only = false) const {
    if (failures_only && all_pass()) return;
    size_t width = 4;
    for (const auto& r : rows_) width = std::max(width, r.name.size());
    out << std::left << std::setw(static_cast<int>(width)) << "name"
        << "  " << std::right << std::setw(12) << "max |diff|"
        << "  " << std::setw(12) << "max rel"
        << "  result  (sketch rows: over the sketch statistics)\n";
    for (const auto& r : rows_) {
      if (failures_only && r.result.pass) continue;
      out << std::left << std::setw(static_cast<int>(width)) << r.name << "  " << std::right
          << std::scientific << std::setprecision(3) << std::setw(12) << number(r.result.max_abs)
          << "  " << std::setw(12) << number(r.result.max_rel) << "  "
          << (r.result.pass ? "pass" : "FAIL");
      if (!r.result.problem.empty()) out << "  " << r.result.problem;
      out << "\n";
    }
    out << std::defaultfloat;
  }

 private:
  std::vector<Row> rows_;
};

std::vector<at::Tensor> to_tensors(const std::vector<TensorData>& data) {
  std::vector<at::Tensor> out;
  for (const auto& d : data) out.push_back(to_tensor(d));
  return out;
}

/// A result drawn from random numbers that could not be replayed: the reference's dtype and
/// shape, and finite values (a wrong mask or scale still shows as a NaN/inf or a shape error).
Comparison check_unreplayed(const at::Tensor& actual, const at::Tensor& expected) {
  Comparison c;
  c.max_abs = c.max_rel = std::nan("");
  c.pass = actual.defined() && actual.scalar_type() == expected.scalar_type() &&
           actual.sizes() == expected.sizes() &&
           (!actual.is_floating_point() || actual.isfinite().all().item<bool>());
  c.problem = c.pass ? "random: dtype, shape, finite" : "random: got " + describe(actual) +
                                                            ", reference " + describe(expected);
  return c;
}

/// How results are checked: the tolerances, and whether the exporter's random draws are
/// replayed (then results that depend on them are compared like any other; else by dtype,
/// shape and finite values).
struct Checker {
  ToleranceOverride tol;
  bool replay = false;

  Comparison tensor(const at::Tensor& actual, const TensorData& expected, bool random) const {
    const at::Tensor e = to_tensor(expected);
    if (random && !replay) return check_unreplayed(actual, e);
    return compare(actual, e, tol.for_dtype(e.scalar_type()), expected.float64_rmse);
  }

  Comparison sketch(const at::Tensor& g, const GradSketch& sketch, uint32_t seed,
                    bool random) const {
    Comparison c;
    if (random && !replay) {  // as check_unreplayed, from the sketch's meta
      c.max_abs = c.max_rel = std::nan("");
      c.pass = g.defined() && g.scalar_type() == sketch.dtype &&
               g.sizes().vec() == sketch.sizes && g.isfinite().all().item<bool>();
      std::ostringstream ref_type;
      ref_type << sketch.dtype << c10::IntArrayRef(sketch.sizes);
      c.problem = c.pass ? "random: dtype, shape, finite (sketch)"
                         : "random: got " + describe(g) + ", reference sketch of " +
                               ref_type.str();
      return c;
    }
    const Tolerance t = tol.for_dtype(sketch.dtype);
    const GradSketchCheck s = check_grad_sketch(g, sketch, seed, t.rtol, t.atol);
    c.pass = s.pass;
    c.by_float64 = s.by_float64;
    c.max_abs = s.max_abs;
    c.max_rel = s.max_rel;
    c.problem = !s.pass ? s.problem : s.by_float64 ? "(sketch; float64 rule)" : "(sketch)";
    return c;
  }
};

void compare_lists(Table& table, const std::string& prefix, const std::vector<at::Tensor>& actual,
                   const std::vector<TensorData>& expected, const std::set<int64_t>& random,
                   const Checker& checker) {
  if (actual.size() != expected.size()) {
    Comparison c;
    c.problem =
        std::to_string(actual.size()) + " values, reference has " + std::to_string(expected.size());
    table.add(prefix, c);
  }
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    table.add(prefix + "[" + std::to_string(i) + "]",
              checker.tensor(actual[i], expected[i], random.count(static_cast<int64_t>(i)) > 0));
  }
}

void compare_named(Table& table, const std::string& prefix, const NamedTensors& actual,
                   const std::vector<std::pair<std::string, TensorData>>& expected,
                   const std::set<std::string>& random, const Checker& checker) {
  std::map<std::string, at::Tensor> by_name(actual.begin(), actual.end());
  for (const auto& [name, data] : expected) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      Comparison c;
      c.problem = "not produced by the runtime";
      table.add(prefix + " " + name, c);
      continue;
    }
    table.add(prefix + " " + name, checker.tensor(it->second, data, random.count(name) > 0));
  }
}

/// Gradients against their sketches (schema 1.2, pt2rt/grad_sketch.h): one row each, marked
/// "(sketch)"; the error columns are over the sketch's statistics.
void compare_sketches(Table& table, const std::string& prefix, const NamedTensors& actual,
                      const ExampleReferences& ref, const std::set<std::string>& random,
                      const Checker& checker) {
  std::map<std::string, at::Tensor> by_name(actual.begin(), actual.end());
  for (const GradSketch& sketch : ref.grad_sketches) {
    auto it = by_name.find(sketch.name);
    if (it == by_name.end()) {
      Comparison c;
      c.problem = "not produced by the runtime";
      table.add(prefix + " " + sketch.name, c);
      continue;
    }
    table.add(prefix + " " + sketch.name,
              checker.sketch(it->second, sketch, ref.grad_sketch_seed,
                             random.count(sketch.name) > 0));
  }
}

/// Dtype and static sizes of `t` against the signature's meta.
Comparison check_signature(const at::Tensor& t, const TensorMeta* meta, const Program& program) {
  Comparison c;
  c.pass = true;
  c.max_abs = c.max_rel = std::nan("");
  if (meta == nullptr) return c;
  bool ok = t.defined() && t.scalar_type() == meta->dtype &&
            t.dim() == static_cast<int64_t>(meta->sizes.size());
  for (size_t d = 0; ok && d < meta->sizes.size(); ++d) {
    ok = !meta->sizes[d].is_static() || meta->sizes[d].value == t.size(static_cast<int64_t>(d));
  }
  if (!ok) {
    c.pass = false;
    c.problem = "got " + describe(t) + ", signature says " + meta_string(*meta, program);
  } else {
    c.problem = "matches signature " + meta_string(*meta, program);
  }
  return c;
}

}  // namespace

int cmd_verify(int argc, char** argv) {
  cxxopts::Options options = model_options(
      "verify",
      "Run every bundled example through inference and training forward+backward and compare "
      "outputs, gradients and buffers with the eager references recorded at export "
      "(torch.testing.assert_close default tolerances). Exit 1 on any mismatch.\n",
      "archive to verify");
  // clang-format off
  options.add_options()
      ("device", "cpu or cuda[:index]", cxxopts::value<std::string>()->default_value("cpu"))
      ("rtol", "relative tolerance for every floating comparison (default: "
       "torch.testing.assert_close's for the dtype, float32 1.3e-6)", cxxopts::value<double>())
      ("atol", "absolute tolerance for every floating comparison (default: assert_close's for "
       "the dtype, float32 1e-5)", cxxopts::value<double>())
      ("allow-tf32", "keep TF32 on for CUDA convolutions and matmuls while verifying (default: "
       "off, as the references are full float32)")
      ("threads", "intra-op threads to run with on the CPU (default: the count the references "
       "were computed with, metadata reference_threads; ATen's kernels choose by it)",
       cxxopts::value<int>())
      ("allow-no-examples", "exit 0 on an archive without bundled examples (default: exit 1, "
       "nothing was verified)")
      ("quiet", "print only the rows that fail and the summary lines, not every check");
  // clang-format on
  add_load_options(options);
  const auto args = parse_model_options(options, argc, argv);
  if (!args) return kExitOk;
  const cxxopts::ParseResult& result = args->result;
  const std::string& path = args->path;
  const c10::Device device = parse_device(result["device"].as<std::string>());
  ToleranceOverride tol;
  for (const char* name : {"rtol", "atol"}) {
    if (result.count(name) == 0) continue;
    const double v = result[name].as<double>();
    if (!(v >= 0.0) || !std::isfinite(v)) {
      throw UsageError(std::string("--") + name + " must be a finite number >= 0, got " +
                       std::to_string(v));
    }
    (std::string(name) == "rtol" ? tol.rtol : tol.atol) = v;
  }
  std::optional<int> requested_threads;
  if (result.count("threads") > 0) {
    requested_threads = result["threads"].as<int>();
    if (*requested_threads < 1) {
      throw UsageError("--threads must be at least 1, got " + std::to_string(*requested_threads));
    }
  }
  const bool allow_tf32 = result.count("allow-tf32") > 0;
  Tf32Guard tf32(allow_tf32);
  Model model = Model::load(path, device, load_options(result));
  const Program& program = model.program();
  const std::optional<ThreadChoice> threads = verify_threads(program, device, requested_threads);
  std::optional<IntraOpThreadsGuard> thread_guard;
  if (threads) thread_guard.emplace(threads->threads);
  const std::string reference_device = program.producer.capture_device;
  tol.cross_device = c10::DeviceTypeName(device.type(), /*lower_case=*/true) != reference_device;
  const std::vector<Example> examples = model.examples();  // decoded now, not kept by the model
  if (examples.empty()) {
    const bool allowed = result.count("allow-no-examples") > 0;
    std::cout << path << ": no bundled examples, nothing to verify"
              << (allowed ? " (--allow-no-examples)" : " (export with examples, or pass "
                                                       "--allow-no-examples)")
              << "\n";
    return allowed ? kExitOk : kExitCheckFailed;
  }
  const bool trainable = has_training_graphs(program);
  const std::optional<uint64_t> seed = reference_rng_seed(program);
  const bool replay = replays_reference_draws(program, device);
  const RandomDependence random = random_dependence(program);
  const Checker checker{tol, replay};
  auto seed_generator = [&] {
    if (seed) at::manual_seed(*seed);
  };
  const Graph* sig = signature_graph(program);
  Table table;
  bool any_references = false;
  for (const auto& example : examples) {
    const auto inputs = to_device(to_tensors(example.inputs), device);
    const std::string& name = example.name;
    seed_generator();
    const auto exported_buffers = snapshot_buffers(model);
    auto outputs = run_inference(model, fresh_copies(inputs), nullptr);
    restore_buffers(model, exported_buffers);
    if (!example.references) {
      const auto specs = sig ? user_outputs(program, *sig) : std::vector<UserValue>{};
      for (size_t i = 0; i < outputs.size(); ++i) {
        const TensorMeta* meta = i < specs.size() ? specs[i].meta : nullptr;
        table.add(name + " output[" + std::to_string(i) + "]",
                  check_signature(outputs[i], meta, program));
      }
      if (trainable) {
        const auto saved = snapshot_buffers(model);
        TrainStep step = run_training_step(model, fresh_copies(inputs), {});
        restore_buffers(model, saved);
        for (size_t i = 0; i < step.outputs.size(); ++i) {
          const TensorMeta* meta = i < specs.size() ? specs[i].meta : nullptr;
          table.add(name + " train output[" + std::to_string(i) + "]",
                    check_signature(step.outputs[i], meta, program));
        }
      }
      continue;
    }
    any_references = true;
    const ExampleReferences& ref = *example.references;
    compare_lists(table, name + " output", outputs, ref.outputs, random.outputs, checker);
    if (trainable && !ref.train_outputs.empty()) {
      const auto saved = snapshot_buffers(model);
      seed_generator();
      TrainStep step = run_training_step(model, fresh_copies(inputs),
                                         to_device(to_tensors(ref.grad_outputs), device));
      compare_lists(table, name + " train output", step.outputs, ref.train_outputs,
                    random.train_outputs, checker);
      compare_named(table, name + " grad", step.grads, ref.grads, random.grads, checker);
      compare_sketches(table, name + " grad", step.grads, ref, random.grads, checker);
      compare_named(table, name + " buffer", model.named_buffers(), ref.buffers, random.buffers,
                    checker);
      restore_buffers(model, saved);
    }
  }

  table.print(std::cout, result.count("quiet") > 0);
  if (tol.cross_device && any_references) {
    std::cout << "cross-device: the references were computed on " << reference_device
              << ", this runs on " << c10::DeviceTypeName(device.type(), true)
              << ": floating tolerances at least rtol = "
              << "atol = " << kCrossDeviceTolerance << " (PyTorch's CPU-vs-CUDA consistency "
              << "test, test_compare_cpu), unless --rtol/--atol\n";
  }
  if (table.by_float64() > 0) {
    std::cout << "float64 rule: " << table.by_float64() << " check(s) outside the tolerance are "
              << "as close to eager float64 as eager float32 is (schema/README.md \"The float64 "
              << "rule\")\n";
  }
  if (random.any && any_references) {
    std::cout << "randomness: the graphs draw random numbers; "
              << (replay ? "replayed the exporter's draws (seed " + std::to_string(*seed) +
                               ", LibTorch " + running_libtorch_version() + ")"
                         : std::string("could not replay the exporter's draws (") +
                               (!seed ? "no recorded seed"
                                : !draws_in_eagers_order(program)
                                    ? "the graphs draw in another order than eager did, found "
                                      "at export"
                                : !device.is_cpu() ? "device " + device.str()
                                                   : "exported with torch " +
                                                         program.producer.torch_version +
                                                         ", running LibTorch " + running_libtorch_version()) +
                               "): results marked 'random' checked by dtype, shape and finite "
                               "values")
              << "\n";
  }
  if (threads) {
    std::cout << "threads: " << threads->threads << " intra-op (" << threads->why << ")\n";
  }
  if (!any_references) {
    std::cout << path << ": no references (the weights were re-saved after export); ran "
              << examples.size() << " example(s) and checked outputs against the "
              << "signature: " << (table.all_pass() ? "ok" : "MISMATCH") << "\n";
    return table.all_pass() ? kExitOk : kExitCheckFailed;
  }
  if (!table.all_pass()) {
    std::cout << "FAILED: " << table.failures() << " of " << table.size()
              << " checks differ from the eager references (device " << device << ", TF32 "
              << (Tf32Guard::enabled() ? "on" : "off") << ")\n";
    return kExitCheckFailed;
  }
  std::cout << "OK: " << table.size() << " checks match the eager references ("
            << examples.size() << " example(s), device " << device << ", TF32 "
            << (Tf32Guard::enabled() ? "on" : "off") << ")\n";
  return kExitOk;
}

}  // namespace pt2rt::cli
