// runtime/kernels/forward_stash.cpp — see forward_stash.h.
#include "kernels/forward_stash.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>

namespace pt2rt {

std::optional<TensorKey> TensorKey::of(const at::Tensor& t) {
  if (!t.defined() || t.is_inference() || !t.has_storage()) return std::nullopt;
  TensorKey k;
  k.storage_ = t.storage().getWeakStorageImpl();
  k.tensor_ = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(
      t.getIntrusivePtr());
  k.offset_ = t.storage_offset();
  k.sizes_ = t.sizes().vec();
  k.strides_ = t.strides().vec();
  k.version_ = t._version();
  return k;
}

bool TensorKey::same_place(const at::Tensor& t) const {
  if (!t.defined() || !t.has_storage()) return false;
  const c10::intrusive_ptr<c10::StorageImpl> live = storage_.lock();
  return live && live.get() == t.storage().unsafeGetStorageImpl() &&
         t.storage_offset() == offset_ && t.sizes() == c10::IntArrayRef(sizes_) &&
         t.strides() == c10::IntArrayRef(strides_);
}

bool TensorKey::same_contents(const at::Tensor& t) const {
  return same_place(t) && !t.is_inference() && t._version() == version_;
}

bool can_keep_graph(const std::vector<at::Tensor>& args) {
  if (c10::InferenceMode::is_enabled()) return false;
  for (const at::Tensor& t : args) {
    if (t.is_inference()) return false;
  }
  return true;
}

std::optional<std::vector<TensorKey>> keys_of(const std::vector<at::Tensor>& ts) {
  std::vector<TensorKey> keys;
  keys.reserve(ts.size());
  for (const at::Tensor& t : ts) {
    std::optional<TensorKey> k = TensorKey::of(t);
    if (!k) return std::nullopt;
    keys.push_back(std::move(*k));
  }
  return keys;
}

namespace {

bool same_places(const std::vector<TensorKey>& keys, const std::vector<at::Tensor>& args) {
  if (keys.size() != args.size()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!keys[i].same_place(args[i])) return false;
  }
  return true;
}

}  // namespace

void ForwardStash::forget(uint64_t tag, const std::vector<at::Tensor>& args) {
  std::vector<at::Tensor> dropped;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->tag == tag && same_places(it->keys, args)) {
      for (at::Tensor& t : it->saved) dropped.push_back(std::move(t));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void ForwardStash::put(uint64_t tag, const std::vector<at::Tensor>& args,
                       std::vector<at::Tensor> saved) {
  std::optional<std::vector<TensorKey>> keys = keys_of(args);
  if (!keys || capacity_ == 0) return;
  std::vector<at::Tensor> dropped;  // released outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    const bool dead = std::any_of(it->keys.begin(), it->keys.end(),
                                  [](const TensorKey& k) { return k.expired(); });
    if (dead || (it->tag == tag && same_places(it->keys, args))) {
      for (at::Tensor& t : it->saved) dropped.push_back(std::move(t));
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
  while (entries_.size() >= capacity_) {
    for (at::Tensor& t : entries_.front().saved) dropped.push_back(std::move(t));
    entries_.pop_front();
  }
  entries_.push_back(Entry{tag, std::move(*keys), std::move(saved)});
}

std::optional<std::vector<at::Tensor>> ForwardStash::take(uint64_t tag,
                                                          const std::vector<at::Tensor>& args) {
  std::lock_guard<std::mutex> lock(mu_);
  // Newest first: a forward's backward usually follows it closely.
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->tag != tag || it->keys.size() != args.size()) continue;
    bool same = true;
    for (size_t i = 0; i < args.size() && same; ++i) same = it->keys[i].same_contents(args[i]);
    if (!same) continue;  // (an in-place write since: the backward recomputes)
    std::vector<at::Tensor> saved = std::move(it->saved);
    entries_.erase(std::next(it).base());
    return saved;
  }
  return std::nullopt;
}

size_t ForwardStash::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

void ForwardStash::clear() {
  std::deque<Entry> dropped;
  std::lock_guard<std::mutex> lock(mu_);
  dropped.swap(entries_);
}

}  // namespace pt2rt
