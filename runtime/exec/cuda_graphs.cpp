// runtime/exec/cuda_graphs.cpp — cuda_graphs.h on a LibTorch with CUDA (at::cuda::CUDAGraph).
#include "exec/cuda_graphs.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <ATen/ops/equal.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "core/batched_copy.h"
#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

/// The default CPU generator's state (a copy), to tell whether a call drew from it.
at::Tensor cpu_generator_state() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

class CapturedCallImpl final : public CapturedCall {
 public:
  CapturedCallImpl(std::unique_ptr<at::cuda::CUDAGraph> graph, at::cuda::MempoolId_t pool,
                   std::vector<at::Tensor> inputs, std::vector<at::Tensor> outputs)
      : graph_(std::move(graph)), pool_(pool), inputs_(std::move(inputs)),
        outputs_(std::move(outputs)) {}

  const std::vector<at::Tensor>& replay(const std::vector<at::Tensor>& inputs) override {
    const size_t n = std::min(inputs.size(), inputs_.size());
    copy_all(std::vector<at::Tensor>(inputs_.begin(), inputs_.begin() + n),
             std::vector<at::Tensor>(inputs.begin(), inputs.begin() + n));
    graph_->replay();
    return outputs_;
  }

  at::cuda::MempoolId_t pool() const { return pool_; }

 private:
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  at::cuda::MempoolId_t pool_;
  std::vector<at::Tensor> inputs_, outputs_;  // static: the graph reads and writes these
};

class GraphCapturerImpl final : public GraphCapturer {
 public:
  explicit GraphCapturerImpl(c10::Device device)
      : device_(device),
        side_(at::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())) {}

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

  std::vector<at::Tensor> warm_up(const std::vector<at::Tensor>& inputs,
                                  const Run& run) override {
    c10::cuda::CUDAGuard device_guard(device_);
    return on_side_stream([&] { return run(inputs); });
  }

  std::unique_ptr<CapturedCall> capture(const std::vector<at::Tensor>& inputs, const Run& run,
                                        const CapturedCall* share_pool_with,
                                        std::string* error) override {
    c10::cuda::CUDAGuard device_guard(device_);
    const at::cuda::MempoolId_t pool =
        share_pool_with ? static_cast<const CapturedCallImpl*>(share_pool_with)->pool()
                        : at::cuda::graph_pool_handle();
    // Static buffers: the inputs' strides where non-overlapping and dense, else contiguous
    // (an expanded gradient, say: copy_ cannot write into overlapping memory).
    std::vector<at::Tensor> statics = clone_all(inputs);
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    const at::Tensor cpu_before = cpu_generator_state();
    std::string failure;
    std::vector<at::Tensor> outputs = on_side_stream([&] {
      std::vector<at::Tensor> result;
      try {
        graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
      } catch (const std::exception& ex) {
        failure = ex.what();
        return result;
      }
      try {
        result = run(statics);
      } catch (const std::exception& ex) {
        failure = ex.what();
      }
      try {
        graph->capture_end();
      } catch (const std::exception& ex) {
        if (failure.empty()) failure = ex.what();
        // capture_end stops routing allocations to the pool only after a successful end.
        try {
          c10::cuda::CUDACachingAllocator::endAllocateToPool(device_.index(), pool);
        } catch (const std::exception&) {
        }
      }
      return result;
    });
    if (failure.empty() && !at::equal(cpu_before, cpu_generator_state())) {
      failure = "the call draws random numbers from the CPU generator, which a replay would "
                "not draw again";
    }
    if (!failure.empty()) {
      *error = first_line(failure);
      return nullptr;
    }
    return std::make_unique<CapturedCallImpl>(std::move(graph), pool, std::move(statics),
                                              std::move(outputs));
  }

 private:
  const c10::Device device_;
  const c10::cuda::CUDAStream side_;
};

}  // namespace

bool cuda_graphs_available() { return true; }

std::shared_ptr<GraphCapturer> make_graph_capturer(c10::Device device) {
  if (!device.is_cuda()) {
    throw InputError("LoadOptions::cuda_graphs needs a CUDA device, got " + device.str());
  }
  const c10::Device d(c10::kCUDA, device.has_index() ? device.index() : 0);
  return std::make_shared<GraphCapturerImpl>(d);
}

}  // namespace pt2rt
