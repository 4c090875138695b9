// Parity with eager PyTorch on the model set × {default, min_cut}: inference outputs,
// training outputs, parameter gradients after loss.backward(), BatchNorm buffers after a
// training forward — all within torch.testing.assert_close default tolerances. Prints the
// parity table (max abs errors) and writes it to <fixtures>/parity_table.txt (or, when the
// fixtures come from another torch version — tests/cross — parity_table_on_torch<version>.txt).
// The eager references are the running torch's when PT2RT_REFERENCE_FIXTURES points at this
// lane's fixtures (fixtures.h).
// PT2RT_TEST_DEVICE=cuda (or cuda:1, ...) runs the models on that device instead of the CPU
// (inputs moved there; results compared on the CPU).
#include <ATen/ATen.h>
#include "catch_compat.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "assert_close.h"
#include "fixtures.h"
#include "op_resolution.h"
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

void compare(ParityRow& row, double& max_err, const std::string& what, const at::Tensor& actual,
             const at::Tensor& expected) {
  Closeness c = assert_close(actual, expected);
  max_err = std::max(max_err, c.max_abs_error);
  if (!c.ok) row.failures.push_back(what + ": " + c.message);
}

ParityRow check_parity(const std::string& name, const std::string& partitioner) {
  ParityRow row{name, partitioner};
  use_reference_threads(name);
  Record ref = load_record(name + "_ref.pt");
  const c10::Device device = test_device();
  std::vector<at::Tensor> inputs = to_device(to_tensors(ref.at("inputs")), device);

  Model m = Model::load(archive_path(name, partitioner), device);
  // Inference graph (eval mode).
  std::vector<at::Tensor> eval_out = m.forward(inputs);
  std::vector<at::Tensor> eval_ref = to_tensors(ref.at("eval_outputs"));
  if (eval_out.size() != eval_ref.size()) row.failures.push_back("eval output count");
  for (size_t i = 0; i < std::min(eval_out.size(), eval_ref.size()); ++i) {
    compare(row, row.eval, "eval output " + std::to_string(i), eval_out[i], eval_ref[i]);
  }

  // Forward + backward graphs (training mode).
  m.train();
  std::vector<at::Tensor> out = m.forward(inputs);
  std::vector<at::Tensor> train_ref = to_tensors(ref.at("train_outputs"));
  if (out.size() != train_ref.size()) row.failures.push_back("train output count");
  for (size_t i = 0; i < std::min(out.size(), train_ref.size()); ++i) {
    compare(row, row.train, "train output " + std::to_string(i), out[i], train_ref[i]);
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
    compare(row, row.grads, "grad of " + fqn, it->second.grad(), g);
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
            ref_buffers[i].second);
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
