// runtime/exec/inference_graphs.cpp — see inference_graphs.h.
#include "exec/inference_graphs.h"

#include <utility>

#include "core/batched_copy.h"

namespace pt2rt {

InferenceGraphs::InferenceGraphs(std::shared_ptr<GraphCapturer> capturer, size_t max_graphs)
    : capturer_(std::move(capturer)), max_graphs_(max_graphs) {}

std::vector<at::Tensor> InferenceGraphs::call(const std::vector<at::Tensor>& inputs,
                                              const Run& run) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key = graph_key(inputs);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= max_graphs_) return run(inputs);
    it = entries_.emplace(key, Entry{}).first;
  }
  Entry& e = it->second;
  switch (next_step(*capturer_, e.status, e.graph, kCudaGraphWarmupRuns, inputs, run,
                    pool_owner_, "the call for inputs", key)) {
    case KeyStep::WarmUp:
      return capturer_->warm_up(inputs, run);
    case KeyStep::Plain:
      return run(inputs);
    case KeyStep::Replay:
      break;
  }
  if (!pool_owner_) pool_owner_ = e.graph.get();
  const std::vector<at::Tensor>& outputs = e.graph->replay(inputs);
  ++e.status.replays;
  return clone_all(outputs);  // the static outputs are overwritten by the next replay
}

std::vector<std::string> InferenceGraphs::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> lines;
  for (const auto& [key, e] : entries_) lines.push_back(key + ": " + e.status.describe());
  return lines;
}

}  // namespace pt2rt
