// tests/cpp/runtime/fixtures.cpp — see fixtures.h.
#include "fixtures.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace pt2rt::test {
namespace {

std::vector<char> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open fixture " + path);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

}  // namespace

std::string fixtures_dir() {
  const char* dir = std::getenv("PT2RT_RUNTIME_FIXTURES");
  if (dir && *dir) return dir;
#ifdef PT2RT_RUNTIME_FIXTURES_DIR
  return PT2RT_RUNTIME_FIXTURES_DIR;
#else
  throw std::runtime_error("PT2RT_RUNTIME_FIXTURES is not set");
#endif
}

std::vector<std::string> fixture_models() {
  std::ifstream f(fixtures_dir() + "/models.txt");
  if (!f) throw std::runtime_error("missing " + fixtures_dir() + "/models.txt");
  std::vector<std::string> names;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

std::string archive_path(const std::string& model, const std::string& partitioner) {
  return fixtures_dir() + "/" + model + "_" + partitioner + ".pt2";
}

Record load_record(const std::string& file) {
  c10::IValue v = torch::jit::pickle_load(read_file(fixtures_dir() + "/" + file));
  Record r;
  for (const c10::IValue& pair : v.toTupleRef().elements()) {
    const auto& kv = pair.toTupleRef().elements();
    r.emplace(kv.at(0).toStringRef(), kv.at(1));
  }
  return r;
}

std::vector<at::Tensor> to_tensors(const c10::IValue& tuple) {
  std::vector<at::Tensor> out;
  for (const c10::IValue& v : tuple.toTupleRef().elements()) out.push_back(v.toTensor());
  return out;
}

NamedTensors to_named(const c10::IValue& tuple) {
  NamedTensors out;
  for (const c10::IValue& pair : tuple.toTupleRef().elements()) {
    const auto& kv = pair.toTupleRef().elements();
    out.emplace_back(kv.at(0).toStringRef(), kv.at(1).toTensor());
  }
  return out;
}

std::vector<double> to_doubles(const c10::IValue& tuple) {
  std::vector<double> out;
  for (const c10::IValue& v : tuple.toTupleRef().elements()) out.push_back(v.toDouble());
  return out;
}

at::Tensor reference_loss(const std::vector<at::Tensor>& outputs,
                          const std::vector<at::Tensor>& grad_outputs) {
  at::Tensor loss;
  size_t k = 0;
  for (const at::Tensor& o : outputs) {
    if (!o.is_floating_point()) continue;
    at::Tensor term = (o * grad_outputs.at(k++)).sum();
    loss = loss.defined() ? loss + term : term;
  }
  return loss;
}

void use_reference_threads(const std::string& model) {
  int n = static_cast<int>(load_record(model + "_ref.pt").at("num_threads").toInt());
  if (at::get_num_threads() != n) at::set_num_threads(n);
}

}  // namespace pt2rt::test
