// Parity with eager PyTorch on the model set × {default, min_cut}: inference outputs,
// training outputs, parameter gradients after loss.backward(), BatchNorm buffers after a
// training forward — all within torch.testing.assert_close default tolerances. Prints the
// parity table (max abs errors) and writes it to <fixtures>/parity_table.txt (or, when the
// fixtures come from another torch version — tests/cross — parity_table_on_torch<version>.txt).
// The eager references are the running torch's when PT2RT_REFERENCE_FIXTURES points at this
// lane's fixtures (fixtures.h).
// PT2RT_TEST_DEVICE=cuda (or cuda:1, ...) runs the models on that device instead of the CPU
// (inputs moved there; results compared on the CPU). There a result that is not close to eager
// CPU's passes when it is no farther from it than twice eager PyTorch's own result on that
// device, <model>_ref_cuda.pt (recorded by make_runtime_fixtures.py, TF32 off, on a machine
// with CUDA): RMSE(pt2rt, eager CPU) <= 2 RMSE(eager CUDA, eager CPU) + atol / 10 — the test
// models include BatchNorm over 2 elements (32x32 images, batch 2), where any two devices'
// roundings differ by O(1).
#include <ATen/ATen.h>
#include "catch_compat.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "assert_close.h"
#include "fixtures.h"
#include "plan/op_resolution.h"
#include "pt2rt/model.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

c10::Device test_device() {
  const char* d = std::getenv("PT2RT_TEST_DEVICE");
  return d && *d ? c10::Device(d) : c10::Device(c10::kCPU);
}

std::vector<at::Tensor> to_device(std::vector<at::Tensor> xs, c10::Device device) {
  for (at::Tensor& x : xs) x = x.to(device);
  return xs;
}

struct ParityRow {
  std::string model, partitioner;
  double eval = 0, train = 0, grads = 0, buffers = 0;
  size_t n_grads = 0, n_buffers = 0;
  std::vector<std::string> failures;
};

/// Root-mean-square difference of two tensors of one shape, in float64 on the CPU.
double rmse(const at::Tensor& a, const at::Tensor& b) {
  return std::sqrt((a.detach().to(at::kCPU, at::kDouble) - b.detach().to(at::kCPU, at::kDouble))
                       .pow(2)
                       .mean()
                       .item<double>());
}

/// `on_device`: eager PyTorch's result on the test device (undefined on the CPU): see above.
void compare(ParityRow& row, double& max_err, const std::string& what, const at::Tensor& actual,
             const at::Tensor& expected, const at::Tensor& on_device = at::Tensor()) {
  Closeness c = assert_close(actual, expected);
  max_err = std::max(max_err, c.max_abs_error);
  if (!c.ok && on_device.defined() && actual.defined() && actual.is_floating_point() &&
      actual.sizes() == expected.sizes() && on_device.sizes() == expected.sizes()) {
    const double atol = default_tolerances(expected.scalar_type()).second;
    if (rmse(actual, expected) <= 2.0 * rmse(on_device, expected) + atol / 10.0) {
      return;
    }
    c.message += " (and farther from eager CPU than twice eager on the device)";
  }
  if (!c.ok) row.failures.push_back(what + ": " + c.message);
}

/// Element `i` of `list`, or an undefined tensor.
at::Tensor element(const std::vector<at::Tensor>& list, size_t i) {
  return i < list.size() ? list[i] : at::Tensor();
}

/// `fqn`'s tensor in `named`, or an undefined tensor.
at::Tensor named(const NamedTensors& list, const std::string& fqn) {
  for (const auto& [n, t] : list) {
    if (n == fqn) return t;
  }
  return at::Tensor();
}

ParityRow check_parity(const std::string& name, const std::string& partitioner) {
  ParityRow row{name, partitioner};
  use_reference_threads(name);
  Record ref = load_record(name + "_ref.pt");
  const c10::Device device = test_device();
  // Eager PyTorch on the test device, where recorded.
  Record dev;
  if (!device.is_cpu() && std::ifstream(reference_dir() + "/" + name + "_ref_cuda.pt").good()) {
    dev = load_record(name + "_ref_cuda.pt");
  }
  auto dev_list = [&](const char* key) {
    return dev.count(key) ? to_tensors(dev.at(key)) : std::vector<at::Tensor>{};
  };
  auto dev_named = [&](const char* key) {
    return dev.count(key) ? to_named(dev.at(key)) : NamedTensors{};
  };
  const std::vector<at::Tensor> dev_eval = dev_list("eval_outputs");
  const std::vector<at::Tensor> dev_train = dev_list("train_outputs");
  const NamedTensors dev_grads = dev_named("grads");
  const NamedTensors dev_buffers = dev_named("buffers");
  std::vector<at::Tensor> inputs = to_device(to_tensors(ref.at("inputs")), device);

  Model m = Model::load(archive_path(name, partitioner), device);
  // Inference graph (eval mode).
  std::vector<at::Tensor> eval_out = m.forward(inputs);
  std::vector<at::Tensor> eval_ref = to_tensors(ref.at("eval_outputs"));
  if (eval_out.size() != eval_ref.size()) row.failures.push_back("eval output count");
  for (size_t i = 0; i < std::min(eval_out.size(), eval_ref.size()); ++i) {
    compare(row, row.eval, "eval output " + std::to_string(i), eval_out[i], eval_ref[i],
            element(dev_eval, i));
  }

  // Forward + backward graphs (training mode).
  m.train();
  std::vector<at::Tensor> out = m.forward(inputs);
  std::vector<at::Tensor> train_ref = to_tensors(ref.at("train_outputs"));
  if (out.size() != train_ref.size()) row.failures.push_back("train output count");
  for (size_t i = 0; i < std::min(out.size(), train_ref.size()); ++i) {
    compare(row, row.train, "train output " + std::to_string(i), out[i], train_ref[i],
            element(dev_train, i));
  }
  reference_loss(out, to_device(to_tensors(ref.at("grad_outputs")), device)).backward();

  NamedTensors ref_grads = to_named(ref.at("grads"));
  auto params = m.named_parameters();
  for (const auto& [fqn, g] : ref_grads) {
    auto it = std::find_if(params.begin(), params.end(), [&](auto& p) { return p.first == fqn; });
    if (it == params.end()) {
      row.failures.push_back("no parameter " + fqn);
      continue;
    }
    compare(row, row.grads, "grad of " + fqn, it->second.grad(), g, named(dev_grads, fqn));
    ++row.n_grads;
  }
  // Frozen parameters get no gradient.
  for (const auto& [fqn, p] : params) {
    bool trainable = std::any_of(ref_grads.begin(), ref_grads.end(),
                                 [&](auto& r) { return r.first == fqn; });
    if (!trainable && p.grad().defined()) row.failures.push_back("frozen " + fqn + " got a grad");
  }

  NamedTensors ref_buffers = to_named(ref.at("buffers"));
  auto buffers = m.named_buffers();
  if (buffers.size() != ref_buffers.size()) row.failures.push_back("buffer count");
  for (size_t i = 0; i < std::min(buffers.size(), ref_buffers.size()); ++i) {
    if (buffers[i].first != ref_buffers[i].first) row.failures.push_back("buffer order");
    compare(row, row.buffers, "buffer " + buffers[i].first, buffers[i].second,
            ref_buffers[i].second, named(dev_buffers, buffers[i].first));
    ++row.n_buffers;
  }
  return row;
}

std::string format_table(const std::vector<ParityRow>& rows) {
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line, "%-17s %-8s %12s %12s %12s %12s  %s\n", "model", "part.",
                "eval out", "train out", "param grads", "BN buffers", "status");
  os << line;
  for (const ParityRow& r : rows) {
    std::snprintf(line, sizeof line, "%-17s %-8s %12.3g %12.3g %12.3g %12.3g  %s (%zu grads, %zu buffers)\n",
                  r.model.c_str(), r.partitioner.c_str(), r.eval, r.train, r.grads, r.buffers,
                  r.failures.empty() ? "ok" : "FAIL", r.n_grads, r.n_buffers);
    os << line;
  }
  return os.str();
}

}  // namespace

TEST_CASE("parity with eager PyTorch on the model set, both partitioners", "[parity]") {
  std::vector<ParityRow> rows;
  for (const std::string& name : fixture_models()) {
    for (const std::string& partitioner : partitioners()) {
      INFO(name << " / " << partitioner);
      rows.push_back(check_parity(name, partitioner));
      for (const std::string& f : rows.back().failures) FAIL_CHECK(f);
      CHECK(rows.back().n_grads > 0);
    }
  }
  std::string table = format_table(rows);
  const std::string running = running_torch_version();
  std::cout << "\nparity of archives exported with torch " << fixtures_torch_version()
            << " vs eager torch " << reference_torch_version() << ", on LibTorch " << running
            << ", " << test_device()
            << " (max abs error; assert_close default tolerances)\n" << table;
  const bool cross = release_of(fixtures_torch_version()) != release_of(running);
  std::ofstream(fixtures_dir() + (cross ? "/parity_table_on_torch" + running + ".txt"
                                        : std::string("/parity_table.txt")))
      << table;
}
