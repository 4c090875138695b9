// runtime/core/meta_memo.h — results of pure ops on the meta device, remembered for one
// load's meta check (meta_check.h).
//
// The meta check runs every node of every graph on meta tensors. Networks repeat layers
// (resnet18: 20 convolutions in 8 shapes, each again in the inference and the forward graph),
// and in a process that embeds Python torch the Meta kernels of `convolution`, the batch
// norms and their backwards are Python functions (torch._meta_registrations, ~50 µs a call).
// A node whose op is pure — no result aliases an argument, the schema writes nothing — and
// whose arguments have the same metadata as an earlier node's (per tensor: dtype, sizes,
// strides, storage offset; every other argument by value) gets that node's results again,
// as fresh meta tensors of the same dtype, sizes and strides (so the storage ledger counts
// them as new allocations, as the kernel's own results would be). Results that a fresh
// tensor could not reproduce — a storage offset, a larger storage, a storage shared with an
// argument or another result, a non-tensor list — are not remembered.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace pt2rt {

class MetaMemo {
 public:
  /// Whether results of `schema`'s op may be remembered (no aliasing return, no writes).
  static bool pure(const c10::FunctionSchema& schema);

  /// The key of a call of `op` on `args` (meta tensors: their metadata; anything else: its
  /// value), or nullopt when an argument is of a kind the key does not cover.
  static std::optional<std::string> key(const c10::OperatorHandle& op,
                                        const torch::jit::Stack& args);

  /// When a call with `key` was remembered, puts fresh results into `results` and returns
  /// true.
  bool lookup(const std::string& key, torch::jit::Stack& results) const;

  /// Remembers `results` of the call with `key` on `args` (when a fresh tensor can reproduce
  /// them; see above).
  void remember(const std::string& key, const torch::jit::Stack& args,
                const torch::jit::Stack& results);

 private:
  struct Result {
    bool tensor = false;         ///< a tensor (possibly undefined), else `value` as is
    bool defined = false;
    c10::ScalarType dtype = c10::ScalarType::Float;
    std::vector<int64_t> sizes, strides;
    c10::IValue value;
  };
  std::unordered_map<std::string, std::vector<Result>> entries_;
};

}  // namespace pt2rt
