// bench/python_bridge.h — Python embedded in pt2rt_bench (CPython's embedding API,
// https://docs.python.org/3/extending/embedding.html).
//
// The interpreter is the one the exporter runs on (PT2RT_PYTHON at configure time); its
// `import torch` loads the same libtorch/libc10 shared libraries this program links, so
// eager PyTorch shares the intra-op thread pool, at::set_num_threads and the CPU allocator
// with the C++ contenders. The GIL is released while C++ runs (LibTorch's autograd engine
// refuses to run under it) and taken for each call into Python (PyGILState_Ensure), which
// adds well under a microsecond to an eager call. Tensors come back from Python without a
// copy through DLPack (torch.utils.dlpack.to_dlpack, at::fromDLPack), on whatever device
// they live.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace pt2rt::bench {

/// The embedded interpreter with one module of bench/ imported (bench_models.py by default;
/// pt2rt_bench_cuda: cuda_models.py). One per process.
class Python {
 public:
  /// Starts the interpreter and imports `module` from `bench_dir`.
  /// @throws std::runtime_error with the Python traceback text.
  explicit Python(const std::string& bench_dir, const std::string& module = "bench_models");
  ~Python();
  Python(const Python&) = delete;
  Python& operator=(const Python&) = delete;

  /// <module>.<fn>(*string_args) -> str.
  std::string call_str(const std::string& fn, const std::vector<std::string>& args);

  /// A zero-argument Python callable (a bound method of an EagerRunner).
  class Callable {
   public:
    Callable() = default;
    explicit Callable(void* fn) : fn_(fn) {}
    /// Calls it. @throws std::runtime_error on a Python exception.
    void operator()() const;
    /// Calls it; it returns a list or tuple of tensors (any dtype, any device, strided),
    /// handed over without a copy (DLPack: the at::Tensor shares the Python tensor's memory
    /// and keeps it alive). @throws std::runtime_error on a Python exception or another result.
    std::vector<at::Tensor> tensors() const;
    bool valid() const { return fn_ != nullptr; }

   private:
    void* fn_ = nullptr;  // PyObject*, owned by the Python object below
  };

  /// bench_models.runner(name, set_to_none) -> (infer, train_step) bound methods; the
  /// runner stays alive as long as this Python object.
  std::pair<Callable, Callable> eager_runner(const std::string& name, bool set_to_none);

  /// Calls <module>.<factory>(*string_args) and returns the result's bound methods `names`,
  /// in that order; the object stays alive as long as this Python object.
  /// @throws std::runtime_error with the Python traceback text.
  std::vector<Callable> methods(const std::string& factory, const std::vector<std::string>& args,
                                const std::vector<std::string>& names);

  /// Sets torch's intra-op threads from Python (torch.set_num_threads).
  void set_num_threads(int n);

 private:
  std::vector<void*> keep_;  // PyObject* references released in the destructor
  void* module_ = nullptr;
};

}  // namespace pt2rt::bench
