// runtime/exec/cuda_graphs_unavailable.cpp — cuda_graphs.h for a LibTorch without CUDA.
#include "exec/cuda_graphs.h"

#include "pt2rt/errors.h"

namespace pt2rt {

bool cuda_graphs_available() { return false; }

std::shared_ptr<GraphCapturer> make_graph_capturer(c10::Device device) {
  throw InputError("LoadOptions::cuda_graphs on " + device.str() +
                   ": this pt2rt was built against a LibTorch without CUDA; build it against a "
                   "CUDA LibTorch (docs/cuda.md) or load without cuda_graphs");
}

}  // namespace pt2rt
