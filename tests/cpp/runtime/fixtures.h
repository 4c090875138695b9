// tests/cpp/runtime/fixtures.h — the runtime fixtures made by
// tests/fixtures/make_runtime_fixtures.py (see its docstring for the file layout).
//
// The directory is the build's fixtures/runtime (compiled in), or the environment variable
// PT2RT_RUNTIME_FIXTURES when set. ctest makes the fixtures first (runtime_fixtures test);
// a test binary run by hand needs them made once (ctest -R runtime_fixtures).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace pt2rt::test {

using Record = std::map<std::string, c10::IValue>;
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

/// The fixture directory (see above).
std::string fixtures_dir();
/// The model names (models.MODELS order), from <dir>/models.txt.
std::vector<std::string> fixture_models();
/// "<dir>/<model>_<partitioner>.pt2"
std::string archive_path(const std::string& model, const std::string& partitioner);
/// Reads "<dir>/<file>" (torch.save of a tuple of (key, value) pairs).
Record load_record(const std::string& file);

std::vector<at::Tensor> to_tensors(const c10::IValue& tuple);
NamedTensors to_named(const c10::IValue& tuple);
std::vector<double> to_doubles(const c10::IValue& tuple);

/// The references' loss: sum over the floating outputs of (out * grad_outputs[k]).sum(), k
/// counting floating outputs (its gradients are the recorded "grads").
at::Tensor reference_loss(const std::vector<at::Tensor>& outputs,
                          const std::vector<at::Tensor>& grad_outputs);

/// Sets at::set_num_threads to the thread count the eager references were computed with
/// (the record's "num_threads"): some kernels' reduction order depends on it.
void use_reference_threads(const std::string& model);

inline const std::vector<std::string>& partitioners() {
  static const std::vector<std::string> p{"default", "min_cut"};
  return p;
}

}  // namespace pt2rt::test
