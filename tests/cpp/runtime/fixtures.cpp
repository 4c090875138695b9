// tests/cpp/runtime/fixtures.cpp — see fixtures.h.
#include "fixtures.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "cross_expectations.h"
#include "plan/op_resolution.h"

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

std::string reference_dir() {
  const char* dir = std::getenv("PT2RT_REFERENCE_FIXTURES");
  return dir && *dir ? std::string(dir) : fixtures_dir();
}

namespace {

std::string torch_version_in(const std::string& dir) {
  std::ifstream f(dir + "/torch_version");
  std::string version;
  if (!f || !std::getline(f, version) || version.empty()) {
    throw std::runtime_error("missing " + dir + "/torch_version");
  }
  return version;
}

}  // namespace

std::string fixtures_torch_version() { return torch_version_in(fixtures_dir()); }

std::string reference_torch_version() { return torch_version_in(reference_dir()); }

std::string release_of(const std::string& version) {
  size_t n = 0;
  while (n < version.size() && (std::isdigit(static_cast<unsigned char>(version[n])) || version[n] == '.')) ++n;
  return version.substr(0, n);
}

std::vector<std::string> all_fixture_models() {
  std::ifstream f(fixtures_dir() + "/models.txt");
  if (!f) throw std::runtime_error("missing " + fixtures_dir() + "/models.txt");
  std::vector<std::string> names;
  for (std::string line; std::getline(f, line);) {
    if (!line.empty()) names.push_back(line);
  }
  return names;
}

std::vector<std::string> fixture_models() {
  const std::string exported = fixtures_torch_version();
  std::vector<std::string> names;
  for (const std::string& name : all_fixture_models()) {
    if (expected_missing(name, exported, running_torch_version()).empty()) names.push_back(name);
  }
  return names;
}

std::string archive_path(const std::string& model, const std::string& partitioner) {
  return fixtures_dir() + "/" + model + "_" + partitioner + ".pt2";
}

Record load_record(const std::string& file) { return load_record_in(reference_dir(), file); }

Record load_record_in(const std::string& dir, const std::string& file) {
  c10::IValue v = torch::jit::pickle_load(read_file(dir + "/" + file));
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
