// runtime/exec/cuda_graphs.h — recording one call's CUDA kernels into a CUDA graph and
// replaying it, the mechanism under LoadOptions::cuda_graphs (at::cuda::CUDAGraph;
// https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs). What is captured when, per
// input-shape key, is decided above this layer: inference_graphs.h (inference calls),
// training_graphs.h (a training forward and its backward).
//
// A GraphCapturer belongs to one model on one CUDA device. It owns a side stream:
// warm-up runs and captures run there, ordered after the current stream's work and before its
// next (CUDA graphs must be captured on a non-default stream; lazy initialisation — cuBLAS and
// cuDNN handles and workspaces, pt2rt's weight buffers — happens in the warm-ups, outside any
// capture). A capture records `run` over static copies of its inputs into a graph whose
// allocations come from a private memory pool: a new one, or the pool of an earlier capture
// (`share_pool_with`: a backward graph shares its forward graph's pool, as
// torch.cuda.make_graphed_callables does, so tensors the forward's static outputs hold stay
// reserved while memory the forward only used in passing is reused). Parameters and buffers
// are read and written at their own, fixed addresses: a replay sees their current values.
//
// A capture fails — and reports why instead of a graph — when the call synchronises with the
// host (a data-dependent size, a value read on the CPU: CUDA refuses it while a stream
// captures), throws, or draws random numbers from the CPU generator (a replay would not draw
// them again: the default CPU generator's state is compared before and after). Random numbers
// drawn on CUDA stay correct across replays: each replay advances the default CUDA
// generator's Philox offset by what the captured call drew (at::cuda::CUDAGraph registers it).
// Devices: CUDA only; a LibTorch without CUDA builds cuda_graphs_unavailable.cpp, whose
// make_graph_capturer throws.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace pt2rt {

/// One call recorded into a CUDA graph over static input buffers.
class CapturedCall {
 public:
  virtual ~CapturedCall() = default;
  /// Copies `inputs` into the static inputs (same count, dtypes, sizes and definedness as at
  /// capture: callers key captures by graph_key) and replays the graph on the current stream.
  /// @returns the static outputs: the next replay overwrites them (copy what must outlive it).
  virtual const std::vector<at::Tensor>& replay(const std::vector<at::Tensor>& inputs) = 0;
};

class GraphCapturer {
 public:
  /// The call to record: inputs -> outputs, launching its kernels on the current CUDA stream.
  using Run = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;
  virtual ~GraphCapturer() = default;
  /// run(inputs), normally, on the side stream. Errors of `run` propagate unchanged.
  virtual std::vector<at::Tensor> warm_up(const std::vector<at::Tensor>& inputs,
                                          const Run& run) = 0;
  /// Records run(static copies of inputs) into a graph (nothing is computed: replay() does),
  /// in a new private memory pool or in the pool of `share_pool_with` (from this capturer).
  /// @returns null with `*error` set to one line when the capture failed (see the header).
  virtual std::unique_ptr<CapturedCall> capture(const std::vector<at::Tensor>& inputs,
                                                const Run& run,
                                                const CapturedCall* share_pool_with,
                                                std::string* error) = 0;
};

/// Every input's dtype, sizes and strides ("None" for an undefined one): calls of one key
/// can replay one graph.
std::string graph_key(const std::vector<at::Tensor>& inputs);

/// The first line of `text` (capture errors carry LibTorch's multi-line context).
std::string first_line(const std::string& text);

/// What happened to one key's calls, for reports (Model::cuda_graph_report).
struct KeyStatus {
  int warmups = 0;       ///< calls run without a graph before the capture
  int64_t replays = 0;   ///< calls replayed from the graph
  bool captured = false;
  std::string refused;   ///< why the capture failed (calls of the key then run without one)
  /// "warm-up N", "captured, R replays" or "refused: <why>".
  std::string describe() const;
};

/// What a call of one key does next (the keyed caches: inference_graphs.h, training_graphs.h).
enum class KeyStep {
  WarmUp,  ///< run it through GraphCapturer::warm_up (the warm-up is counted already)
  Plain,   ///< run it without a graph: the key is refused
  Replay,  ///< replay `graph`
};

/// The step for a call of `key` whose status and capture are `status` / `graph`: WarmUp while
/// fewer than `warmups_due` warm-ups ran; else, with no capture yet, captures `run` over
/// `inputs` (GraphCapturer::capture, in the pool of `share_pool_with` or a new one) — a
/// failure refuses the key, with one TORCH_WARN naming `what`, the key and the reason.
KeyStep next_step(GraphCapturer& capturer, KeyStatus& status,
                  std::unique_ptr<CapturedCall>& graph, int warmups_due,
                  const std::vector<at::Tensor>& inputs, const GraphCapturer::Run& run,
                  const CapturedCall* share_pool_with, const char* what,
                  const std::string& key);

/// Whether this build of pt2rt can capture CUDA graphs (built against a LibTorch with CUDA).
bool cuda_graphs_available();

/// A capturer for calls on `device` (a CUDA device; no index means device 0).
/// @throws pt2rt::InputError when cuda_graphs_available() is false or `device` is not CUDA.
std::shared_ptr<GraphCapturer> make_graph_capturer(c10::Device device);

}  // namespace pt2rt
