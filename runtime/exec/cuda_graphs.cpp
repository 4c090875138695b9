// runtime/exec/cuda_graphs.cpp — cuda_graphs.h on a LibTorch with CUDA (at::cuda::CUDAGraph).
#include "exec/cuda_graphs.h"

#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/empty_strided.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>
#include <sstream>
#include <utility>

#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

std::string key_of(const std::vector<at::Tensor>& inputs) {
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

class CudaGraphsImpl final : public CudaGraphs {
 public:
  CudaGraphsImpl(c10::Device device, size_t max_graphs)
      : device_(device),
        max_graphs_(max_graphs),
        side_(at::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())),
        pool_(at::cuda::graph_pool_handle()) {}

 private:
  /// fn() on the side stream, ordered after the current stream's work and before its next.
  template <typename Fn>
  auto on_side_stream(Fn&& fn) {
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(device_.index());
    at::cuda::CUDAEvent ready;
    ready.record(current);
    ready.block(side_);
    auto result = [&] {
      c10::cuda::CUDAStreamGuard stream_guard(side_);
      return fn();
    }();
    at::cuda::CUDAEvent done;
    done.record(side_);
    done.block(current);
    return result;
  }

 public:
  std::vector<at::Tensor> call(const std::vector<at::Tensor>& inputs, const Run& run) override {
    std::lock_guard<std::mutex> lock(mu_);
    c10::cuda::CUDAGuard device_guard(device_);
    const std::string key = key_of(inputs);
    auto it = entries_.find(key);
    if (it == entries_.end()) {
      if (entries_.size() >= max_graphs_) return run(inputs);
      it = entries_.emplace(key, Entry{}).first;
    }
    Entry& e = it->second;
    if (!e.refused.empty()) return run(inputs);
    if (!e.graph) {
      if (e.warmups < kCudaGraphWarmupRuns) {
        ++e.warmups;
        return on_side_stream([&] { return run(inputs); });
      }
      capture(key, e, inputs, run);
      if (!e.refused.empty()) return run(inputs);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].defined()) e.inputs[i].copy_(inputs[i]);
    }
    e.graph->replay();
    ++e.replays;
    std::vector<at::Tensor> outs;
    outs.reserve(e.outputs.size());
    for (const at::Tensor& o : e.outputs) outs.push_back(o.defined() ? o.clone() : o);
    return outs;
  }

  std::vector<std::string> report() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> lines;
    for (const auto& [key, e] : entries_) {
      std::ostringstream line;
      line << key << ": ";
      if (!e.refused.empty()) line << "refused: " << e.refused;
      else if (e.graph) line << "captured, " << e.replays << " replays";
      else line << "warm-up " << e.warmups;
      lines.push_back(line.str());
    }
    return lines;
  }

 private:
  struct Entry {
    int warmups = 0;
    int64_t replays = 0;
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    std::vector<at::Tensor> inputs, outputs;  // static: the graph reads and writes these
    std::string refused;
  };

  void capture(const std::string& key, Entry& e, const std::vector<at::Tensor>& inputs,
               const Run& run) {
    e.inputs.clear();
    for (const at::Tensor& t : inputs) {
      e.inputs.push_back(t.defined()
                             ? at::empty_strided(t.sizes(), t.strides(), t.options()).copy_(t)
                             : t);
    }
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    std::string error;
    std::vector<at::Tensor> outs = on_side_stream([&] {
      std::vector<at::Tensor> result;
      try {
        graph->capture_begin(pool_, cudaStreamCaptureModeThreadLocal);
      } catch (const std::exception& ex) {
        error = ex.what();
        return result;
      }
      try {
        result = run(e.inputs);
      } catch (const std::exception& ex) {
        error = ex.what();
      }
      try {
        graph->capture_end();
      } catch (const std::exception& ex) {
        if (error.empty()) error = ex.what();
        // capture_end stops routing allocations to the pool only after a successful end.
        try {
          c10::cuda::CUDACachingAllocator::endAllocateToPool(device_.index(), pool_);
        } catch (const std::exception&) {
        }
      }
      return result;
    });
    if (!error.empty()) {
      e.refused = first_line(error);
      e.inputs.clear();
      TORCH_WARN("pt2rt: LoadOptions::cuda_graphs: the call for inputs ", key,
                 " cannot be captured into a CUDA graph (", e.refused,
                 "); calls with these shapes run without one");
      return;
    }
    e.graph = std::move(graph);
    e.outputs = std::move(outs);
  }

  const c10::Device device_;
  const size_t max_graphs_;
  const c10::cuda::CUDAStream side_;
  const at::cuda::MempoolId_t pool_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace

bool cuda_graphs_available() { return true; }

std::unique_ptr<CudaGraphs> make_cuda_graphs(c10::Device device, size_t max_graphs) {
  if (!device.is_cuda()) {
    throw InputError("LoadOptions::cuda_graphs needs a CUDA device, got " + device.str());
  }
  const c10::Device d(c10::kCUDA, device.has_index() ? device.index() : 0);
  return std::make_unique<CudaGraphsImpl>(d, max_graphs);
}

}  // namespace pt2rt
