// runtime/exec/graph_key.cpp — graph_key, first_line, KeyStatus and next_step of
// cuda_graphs.h (built with and without CUDA: the keyed bookkeeping above the capturer is
// device-independent).
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <sstream>

#include "exec/cuda_graphs.h"

namespace pt2rt {

std::string graph_key(const std::vector<at::Tensor>& inputs) {
  std::ostringstream key;
  for (const at::Tensor& t : inputs) {
    if (!t.defined()) {
      key << "None;";
      continue;
    }
    key << c10::toString(t.scalar_type()) << t.sizes() << t.strides() << ";";
  }
  return key.str();
}

std::string first_line(const std::string& text) {
  const size_t end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

std::string KeyStatus::describe() const {
  if (!refused.empty()) return "refused: " + refused;
  if (captured) return "captured, " + std::to_string(replays) + " replays";
  return "warm-up " + std::to_string(warmups);
}

KeyStep next_step(GraphCapturer& capturer, KeyStatus& status,
                  std::unique_ptr<CapturedCall>& graph, int warmups_due,
                  const std::vector<at::Tensor>& inputs, const GraphCapturer::Run& run,
                  const CapturedCall* share_pool_with, const char* what,
                  const std::string& key) {
  if (!status.refused.empty()) return KeyStep::Plain;
  if (graph) return KeyStep::Replay;
  if (status.warmups < warmups_due) {
    ++status.warmups;
    return KeyStep::WarmUp;
  }
  std::string error;
  graph = capturer.capture(inputs, run, share_pool_with, &error);
  if (!graph) {
    status.refused = error;
    TORCH_WARN("pt2rt: LoadOptions::cuda_graphs: ", what, " ", key,
               " cannot be captured into a CUDA graph (", error,
               "); such calls run without one from now on");
    return KeyStep::Plain;
  }
  status.captured = true;
  return KeyStep::Replay;
}

}  // namespace pt2rt
