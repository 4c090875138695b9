// runtime/exec/cuda_graphs.h — LoadOptions::cuda_graphs: an inference call's CUDA kernels
// recorded once per input-shape key into a CUDA graph and replayed, as
// torch.cuda.make_graphed_callables and torch.compile(mode="reduce-overhead") do
// (https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs; at::cuda::CUDAGraph).
//
// Per key (every input's dtype, sizes and strides): the first kWarmupRuns calls run normally,
// on the graphs' own side stream (lazy initialisation — cuBLAS/cuDNN handles and workspaces,
// pt2rt's weight buffers — happens outside any capture); the next captures the call into a
// graph whose allocations come from one private memory pool shared by all of this model's
// graphs, on static copies of the inputs, and every later call copies its inputs into those,
// replays the graph and returns copies of its static outputs (so a result stays valid after
// the next call). Parameters and buffers are read at their own, fixed addresses: a replay
// sees their current values, whoever wrote them. At most `max_graphs` keys are captured;
// calls of further keys run normally.
//
// A capture that fails — the call synchronises with the host (a data-dependent size, a value
// read on the CPU), or anything else CUDA refuses while a stream captures — leaves its key
// refused: a warning names the reason once (c10 TORCH_WARN) and that key's calls run
// normally from then on. Calls through one CudaGraphs are serialised (they share the static
// buffers).
// Devices: CUDA only; the stub build (LibTorch without CUDA) refuses at construction.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pt2rt/load_options.h"  // kCudaGraphWarmupRuns

namespace pt2rt {

class CudaGraphs {
 public:
  /// The call to record: user inputs -> user outputs, launching its kernels on the current
  /// CUDA stream.
  using Run = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
  virtual ~CudaGraphs() = default;
  /// `run(inputs)` through the graph of inputs' key (see above). Returns tensors the caller
  /// owns. Errors of `run` itself outside a capture propagate unchanged.
  virtual std::vector<at::Tensor> call(const std::vector<at::Tensor>& inputs, const Run& run) = 0;
  /// One line per key seen: "<key>: warm-up N", "<key>: captured, R replays" or
  /// "<key>: refused: <reason>" (tests, export-cli profile).
  virtual std::vector<std::string> report() const = 0;
};

/// Whether this build of pt2rt can capture CUDA graphs (built against a LibTorch with CUDA).
bool cuda_graphs_available();

/// Graphs for calls on `device` (a CUDA device), at most `max_graphs` keys.
/// @throws pt2rt::InputError when cuda_graphs_available() is false or `device` is not CUDA.
std::unique_ptr<CudaGraphs> make_cuda_graphs(c10::Device device, size_t max_graphs);

}  // namespace pt2rt
