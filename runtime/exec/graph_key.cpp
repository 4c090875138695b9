// runtime/exec/graph_key.cpp — graph_key and first_line of cuda_graphs.h (built with and
// without CUDA: the keyed bookkeeping above the capturer is device-independent).
#include <c10/util/ArrayRef.h>

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

}  // namespace pt2rt
