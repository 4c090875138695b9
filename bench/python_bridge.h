// bench/python_bridge.h — Python embedded in pt2rt_bench (CPython's embedding API,
// https://docs.python.org/3/extending/embedding.html).
//
// The interpreter is the one the exporter runs on (PT2RT_PYTHON at configure time); its
// `import torch` loads the same libtorch/libc10 shared libraries this program links, so
// eager PyTorch shares the intra-op thread pool, at::set_num_threads and the CPU allocator
// with the C++ contenders. The GIL is released while C++ runs (LibTorch's autograd engine
// refuses to run under it) and taken for each call into Python (PyGILState_Ensure), which
// adds well under a microsecond to an eager call.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace pt2rt::bench {

/// The embedded interpreter with bench/bench_models.py imported. One per process.
class Python {
 public:
  /// Starts the interpreter and imports bench_models from `bench_dir`.
  /// @throws std::runtime_error with the Python traceback text.
  explicit Python(const std::string& bench_dir);
  ~Python();
  Python(const Python&) = delete;
  Python& operator=(const Python&) = delete;

  /// bench_models.<fn>(*string_args) -> str.
  std::string call_str(const std::string& fn, const std::vector<std::string>& args);

  /// A zero-argument Python callable (a bound method of an EagerRunner).
  class Callable {
   public:
    Callable() = default;
    explicit Callable(void* fn) : fn_(fn) {}
    /// Calls it. @throws std::runtime_error on a Python exception.
    void operator()() const;
    bool valid() const { return fn_ != nullptr; }

   private:
    void* fn_ = nullptr;  // PyObject*, owned by the Python object below
  };

  /// bench_models.runner(name, set_to_none) -> (infer, train_step) bound methods; the
  /// runner stays alive as long as this Python object.
  std::pair<Callable, Callable> eager_runner(const std::string& name, bool set_to_none);

  /// Sets torch's intra-op threads from Python (torch.set_num_threads).
  void set_num_threads(int n);

 private:
  std::vector<void*> keep_;  // PyObject* references released in the destructor
  void* module_ = nullptr;
};

}  // namespace pt2rt::bench
