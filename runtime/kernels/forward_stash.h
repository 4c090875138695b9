// runtime/kernels/forward_stash.h — what a native op's forward keeps for its backward when the
// archive's graphs cannot carry it (pt2rt::lstm's cuDNN reserve space: cudnn_rnn.h), found again
// by the identity of the forward's arguments.
//
// The forward and backward of pt2rt's recurrent ops are separate graph nodes whose saved
// activations the exporter fixed (the forward's arguments), so a device-specific by-product of
// the forward (cuDNN's workspace "reserve", which `_cudnn_rnn_backward` needs) cannot travel
// between them as a value. The forward puts it here under the identity of its arguments; the
// backward takes it back when it is handed exactly those arguments, unchanged — else it
// recomputes the forward (activation checkpointing), so a miss costs time, never correctness.
// This is the role autograd's SavedVariable plays for eager PyTorch (version-counter checked:
// https://pytorch.org/docs/stable/autograd.html#in-place-correctness-checks).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

namespace pt2rt {

/// The identity of a tensor's contents at one moment: its storage, held WEAKLY (a key never
/// keeps memory alive, and a storage that was freed can never match a new tensor that the
/// allocator placed at the same address), storage offset, sizes, strides and version counter
/// (bumped by every in-place write: c10::VariableVersion).
class TensorKey {
 public:
  /// nullopt for an undefined tensor or an inference tensor (c10::InferenceMode: it has no
  /// version counter, so a later in-place write could not be detected).
  static std::optional<TensorKey> of(const at::Tensor& t);
  /// `t` views the same live storage with the same offset, sizes and strides.
  bool same_place(const at::Tensor& t) const;
  /// same_place and no in-place write since the key was taken.
  bool same_contents(const at::Tensor& t) const;
  /// The storage, or the tensor the key was taken of, was freed: no backward can come for it
  /// (a backward is handed the forward's own saved tensors) — though a stash entry that holds
  /// an alias of the storage keeps the storage itself alive.
  bool expired() const { return storage_.expired() || tensor_.expired(); }

 private:
  c10::weak_intrusive_ptr<c10::StorageImpl> storage_{c10::intrusive_ptr<c10::StorageImpl>()};
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> tensor_{
      c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  int64_t offset_ = 0;
  std::vector<int64_t> sizes_, strides_;
  int64_t version_ = 0;
};

/// Keys for every tensor of `ts`; nullopt if one has none (TensorKey::of).
std::optional<std::vector<TensorKey>> keys_of(const std::vector<at::Tensor>& ts);

/// Whether a forward on `args` may keep its autograd graph in a ForwardStash: outside
/// c10::InferenceMode (no backward can follow there) and with no inference tensor among them
/// (it has no version counter, so it could not be keyed: TensorKey::of).
bool can_keep_graph(const std::vector<at::Tensor>& args);

/// Bounded, thread-safe (the autograd engine runs a CUDA backward on its device thread) store
/// of tensors a forward saved for its backward. Ownership: the saved tensors are held strongly
/// until take() or eviction; the arguments' storages only weakly.
class ForwardStash {
 public:
  /// At most `capacity` entries: a put() beyond that evicts the oldest (its backward, if one
  /// ever comes, recomputes).
  explicit ForwardStash(size_t capacity) : capacity_(capacity) {}

  /// Keeps `saved` for the forward of `tag` (the op and its flags) on `args`. Entries whose
  /// arguments were freed (no backward can come for them any more) and earlier entries of
  /// `tag` on the same places (superseded by this forward) are dropped first. A no-op when an
  /// argument has no TensorKey.
  void put(uint64_t tag, const std::vector<at::Tensor>& args, std::vector<at::Tensor> saved);
  /// Drops the entries of `tag` on the places of `args`: a forward that keeps nothing calls
  /// it, so that a later backward on these arguments never finds an earlier forward's state
  /// (weights written through Tensor::data() in between would not show in version counters).
  void forget(uint64_t tag, const std::vector<at::Tensor>& args);
  /// Removes and returns what put() kept for `tag` on these very arguments, unchanged since
  /// (TensorKey::same_contents); nullopt otherwise.
  std::optional<std::vector<at::Tensor>> take(uint64_t tag, const std::vector<at::Tensor>& args);
  size_t size() const;
  void clear();

 private:
  struct Entry {
    uint64_t tag;
    std::vector<TensorKey> keys;
    std::vector<at::Tensor> saved;
  };
  mutable std::mutex mu_;
  std::deque<Entry> entries_;
  size_t capacity_;
};

}  // namespace pt2rt
