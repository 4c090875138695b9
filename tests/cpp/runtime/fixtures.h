// tests/cpp/runtime/fixtures.h — the runtime fixtures made by
// tests/fixtures/make_runtime_fixtures.py (see its docstring for the file layout).
//
// The directory is the build's fixtures/runtime (compiled in), or the environment variable
// PT2RT_RUNTIME_FIXTURES when set. ctest makes the fixtures first (runtime_fixtures test);
// a test binary run by hand needs them made once (ctest -R runtime_fixtures).
//
// Eager references (<model>_ref.pt, <model>_train.pt) are read from the same directory, or
// from PT2RT_REFERENCE_FIXTURES when set: the cross-version stage (tests/cross/run.sh) runs
// the other lane's archives against the running torch's own eager references.
#pragma once

#include <ATen/Parallel.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "pt2rt/model.h"

namespace pt2rt::test {

using Record = std::map<std::string, c10::IValue>;
using pt2rt::NamedTensors;  // pt2rt/model.h

/// The fixture directory (see above): archives, models.txt, torch_version.
std::string fixtures_dir();
/// Where the eager references come from (see above); fixtures_dir() unless overridden.
std::string reference_dir();
/// torch.__version__ of the process that exported the fixtures (<dir>/torch_version).
std::string fixtures_torch_version();
/// torch.__version__ of the eager references (<reference_dir()>/torch_version).
std::string reference_torch_version();
/// The release part of a torch version: "2.14.1+debian" and "2.14.1" -> "2.14.1",
/// "1.13.0a0" -> "1.13.0" (Python's torch.__version__ vs LibTorch's TORCH_VERSION).
std::string release_of(const std::string& version);
/// Every model name of <dir>/models.txt (models.lane_models() order of the exporting torch).
std::vector<std::string> all_fixture_models();
/// The models this runtime is expected to run: all_fixture_models(), less those that
/// cross_expectations.h says the running LibTorch refuses (fixtures from another torch major).
std::vector<std::string> fixture_models();
/// "<dir>/<model>_<partitioner>.pt2"
std::string archive_path(const std::string& model, const std::string& partitioner);
/// Reads "<reference_dir()>/<file>" (torch.save of a tuple of (key, value) pairs).
Record load_record(const std::string& file);
/// The same from another fixture directory.
Record load_record_in(const std::string& dir, const std::string& file);

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

/// at::set_num_threads(n) for the scope; the previous count is restored at its end.
struct ScopedThreads {
  int before = at::get_num_threads();
  explicit ScopedThreads(int n) { at::set_num_threads(n); }
  ~ScopedThreads() { at::set_num_threads(before); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;
};

inline const std::vector<std::string>& partitioners() {
  static const std::vector<std::string> p{"default", "min_cut"};
  return p;
}

}  // namespace pt2rt::test
