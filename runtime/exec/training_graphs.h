// runtime/exec/training_graphs.h — LoadOptions::cuda_graphs for training calls: a training
// forward and its backward each replayed from a CUDA graph, as
// torch.cuda.make_graphed_callables does for a module (forward graph, backward graph,
// one private memory pool, static inputs and grad-outputs;
// https://pytorch.org/docs/stable/notes/cuda.html#partial-network-capture).
//
// Per key — the training plan (which gradients are needed) and every user input's dtype,
// sizes and strides — the first kCudaGraphWarmupRuns forwards, and their backwards, run
// normally on the capturer's side stream; the next forward is captured into a new private
// pool and replayed; its backward is captured into the same pool (per grad-outputs key) and
// replayed; from then on a forward costs one graph launch plus the copy of its inputs, a
// backward one launch plus the copy of its grad-outputs. The forward graph's outputs are
// static: the caller copies the user outputs it hands out, and passes the static saved
// activations to the backward, whose graph reads them where the forward graph wrote them.
//
// That makes one rule necessary: a forward replay overwrites the saved activations of the
// previous one, so while a replayed forward's backward is still to come (its autograd graph
// alive and its backward not run), further forwards of that key run without the graph
// (gradient accumulation over micro-batches, a forward kept for later). A backward whose
// activations were overwritten all the same — retain_graph=True, backward again after a later
// forward — throws ExecutionError instead of computing from the wrong values.
// Keys: at most `max_graphs`; calls of further keys run normally. A failed capture refuses
// its key (a warning names the reason once; its calls run normally from then on).
// Thread-safety: calls are serialised; the backward may run on the autograd engine's thread.
// Device-independent bookkeeping: tested on the CPU with a stand-in capturer.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "exec/cuda_graphs.h"
#include "pt2rt/load_options.h"  // kCudaGraphWarmupRuns

namespace pt2rt {

class TrainingGraphs {
 public:
  using Run = GraphCapturer::Run;
  struct Entry;
  /// Ties a backward to the forward call it belongs to. Held by that call's autograd nodes;
  /// dropping it (the autograd graph freed without a backward) ends the wait for the backward.
  struct Ticket {
    std::shared_ptr<Entry> entry;
    uint64_t generation = 0;  ///< the forward replay it belongs to; 0: a warm-up forward
    ~Ticket();
  };
  struct Result {
    std::vector<at::Tensor> outputs;
    bool replayed = false;  ///< outputs are the graph's static outputs (see the header)
  };

  TrainingGraphs(std::shared_ptr<GraphCapturer> capturer, size_t max_graphs);

  /// The training forward `run(inputs)` for plan `plan_key` (any stable identity of the
  /// training plan). `*ticket` receives what backward() needs (null: this call's backward
  /// runs normally).
  Result forward(const void* plan_key, const std::vector<at::Tensor>& inputs, const Run& run,
                 std::shared_ptr<Ticket>* ticket);

  /// @throws ExecutionError when a later forward replay overwrote the saved activations of
  ///   `ticket`'s forward (checked before anything reads them: see the header).
  void check_current(const Ticket& ticket) const;

  /// The backward `run(grad_outputs)` of the forward that issued `ticket`: replayed where
  /// that forward was, warmed up where it was.
  /// @throws ExecutionError when a later forward replay overwrote this backward's saved
  ///   activations (see the header).
  Result backward(const std::shared_ptr<Ticket>& ticket,
                  const std::vector<at::Tensor>& grad_outputs, const Run& run);

  /// One line per key seen: "train plan <n> <inputs key>: forward <KeyStatus>; backward
  /// <grad-outputs key>: <KeyStatus>..." (plans numbered in order of first use).
  std::vector<std::string> report() const;

  struct Entry {
    KeyStatus forward_status;
    std::unique_ptr<CapturedCall> forward;
    struct Backward {
      KeyStatus status;
      std::unique_ptr<CapturedCall> graph;
    };
    std::map<std::string, Backward> backward;  ///< per grad-outputs key
    uint64_t generation = 0;                   ///< forward replays so far
    /// The replay whose backward is still to come, 0 if none.
    std::atomic<uint64_t> pending{0};
  };

 private:
  const std::shared_ptr<GraphCapturer> capturer_;
  const size_t max_graphs_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Entry>> entries_;
  std::map<const void*, size_t> plan_ids_;  ///< training plan -> 1, 2, ... (report lines)
  static void check_current_locked(const Ticket& ticket);
};

}  // namespace pt2rt
