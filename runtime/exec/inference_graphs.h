// runtime/exec/inference_graphs.h — LoadOptions::cuda_graphs for inference calls: recorded
// once per input-shape key into a CUDA graph and replayed, as
// torch.cuda.make_graphed_callables and torch.compile(mode="reduce-overhead") do
// (https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs).
//
// Per key (graph_key: every input's dtype, sizes and strides): the first
// kCudaGraphWarmupRuns calls run normally on the capturer's side stream; the next is captured
// (cuda_graphs.h) into the private memory pool all of this model's inference graphs share,
// and every call from then on copies its inputs into the graph's static inputs, replays it
// and returns copies of its static outputs (a result stays valid after the next call). At
// most `max_graphs` keys are captured; calls of further keys run normally. A key whose
// capture failed is refused: a warning names the reason once (c10 TORCH_WARN) and its calls
// run normally from then on. Calls are serialised (they share the static buffers).
// Device-independent bookkeeping: tested on the CPU with a stand-in capturer.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/cuda_graphs.h"
#include "pt2rt/load_options.h"  // kCudaGraphWarmupRuns

namespace pt2rt {

class InferenceGraphs {
 public:
  using Run = GraphCapturer::Run;
  InferenceGraphs(std::shared_ptr<GraphCapturer> capturer, size_t max_graphs);
  /// `run(inputs)` through the graph of inputs' key (see above). Returns tensors the caller
  /// owns. Errors of `run` itself outside a capture propagate unchanged.
  std::vector<at::Tensor> call(const std::vector<at::Tensor>& inputs, const Run& run);
  /// One line per key seen: "<key>: " + KeyStatus::describe().
  std::vector<std::string> report() const;

 private:
  struct Entry {
    KeyStatus status;
    std::unique_ptr<CapturedCall> graph;
  };
  const std::shared_ptr<GraphCapturer> capturer_;
  const size_t max_graphs_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
  const CapturedCall* pool_owner_ = nullptr;  ///< the first capture: its pool is shared
};

}  // namespace pt2rt
