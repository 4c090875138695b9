// runtime/plan/weight_cache.h — values computed only from a model's weights, kept
// until a weight changes.
//
// An inference graph may compute things from the weights alone: `t(W)` for a linear layer,
// or the folded convolution weights of export(optimize_inference=True)
// (exporter/pt2rt/passes/inference_passes.py). ExecutionPlan hoists such instructions out of the
// per-call path (PlanOptions::cacheable_inputs) and keeps their results here, stamped with
// the identity, version counter (torch's `Tensor._version`, bumped by every in-place
// operation: optimizer steps, copy_, load of new weights into the tensor) and data pointer of
// every weight they read. A call whose weights carry the same stamps reuses the values; any
// difference recomputes them first. So the hoisted graph stays an exact function of the
// current weights.
//
// Not seen (as for autograd's own saved-tensor checks): writes through `Tensor::data()` /
// `.data` / `variable_data()`, which share the storage under a fresh version counter — and
// that is how LibTorch's C++ optimizers (torch::optim SGD, Adam, ...) update parameters. So
// a plan of a load that may train caches only views of its weights (`t(W)`, ...: they read
// the weights' memory at every call, whatever wrote it); values computed from weights are
// cached only for LoadOptions::inference_only loads (PlanOptions::inference_only), which
// pt2rt never trains.
// Inference tensors have no version counter: when a weight is one (a model loaded under
// c10::InferenceMode), nothing is cached and the values are recomputed on every call.
//
// Thread-safety: get() may be called concurrently; a refresh happens under a mutex and
// publishes a new immutable snapshot.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/TensorImpl.h>

#include <memory>
#include <mutex>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt {

class WeightCache {
 public:
  using Values = std::vector<c10::IValue>;

  /// The cached values for the weights in `slots[input_slots[i]]`, recomputed with
  /// `compute()` (which returns them) when absent or stale.
  template <class Compute>
  std::shared_ptr<const Values> get(const std::vector<c10::IValue>& slots,
                                    const std::vector<ValueId>& input_slots, Compute&& compute) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (snapshot_ && matches(*snapshot_, slots, input_slots)) return snapshot_->values;
    }
    auto snap = std::make_shared<Snapshot>();
    const bool cacheable = stamp(slots, input_slots, snap->stamps);
    snap->values = std::make_shared<const Values>(compute());
    if (!cacheable) return snap->values;
    std::lock_guard<std::mutex> lock(mutex_);
    snapshot_ = snap;
    return snap->values;
  }

 private:
  struct Stamp {
    const c10::TensorImpl* impl;
    uint32_t version;
    const void* data;
  };
  struct Snapshot {
    std::vector<Stamp> stamps;
    std::shared_ptr<const Values> values;
  };
  /// Stamps of the weights now in the slots; false when one cannot be stamped (not a
  /// tensor, or an inference tensor without a version counter).
  static bool stamp(const std::vector<c10::IValue>& slots, const std::vector<ValueId>& input_slots,
                    std::vector<Stamp>& out);
  static bool matches(const Snapshot& s, const std::vector<c10::IValue>& slots,
                      const std::vector<ValueId>& input_slots);

  std::mutex mutex_;
  std::shared_ptr<const Snapshot> snapshot_;
};

}  // namespace pt2rt
