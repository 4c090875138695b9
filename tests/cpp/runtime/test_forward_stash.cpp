// ForwardStash / TensorKey (runtime/kernels/forward_stash.h): a backward finds what its forward
// kept only for the very same, unchanged arguments; freed arguments and in-place writes never
// match; the store stays bounded.
#include "catch_compat.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include "kernels/forward_stash.h"

namespace pt2rt {

TEST_CASE("forward_stash: take returns what put kept, once, for the same arguments",
          "[forward_stash]") {
  ForwardStash stash(4);
  const at::Tensor a = at::randn({3, 4}), b = at::randn({5});
  const at::Tensor saved = at::randn({2});
  stash.put(7, {a, b}, {saved});
  CHECK(stash.size() == 1);
  CHECK_FALSE(stash.take(8, {a, b}));          // another op or flags
  CHECK_FALSE(stash.take(7, {b, a}));          // another argument order
  CHECK_FALSE(stash.take(7, {a}));             // another arity
  CHECK_FALSE(stash.take(7, {a.clone(), b}));  // equal values, another tensor
  auto got = stash.take(7, {a.detach(), b});   // another TensorImpl on the same storage: a match
  REQUIRE(got);
  REQUIRE(got->size() == 1);
  CHECK((*got)[0].is_same(saved));
  CHECK(stash.size() == 0);
  CHECK_FALSE(stash.take(7, {a, b}));  // taken once
}

TEST_CASE("forward_stash: an in-place write or another view of the storage does not match",
          "[forward_stash]") {
  ForwardStash stash(4);
  at::Tensor a = at::randn({4, 4});
  stash.put(1, {a}, {at::ones({1})});
  CHECK_FALSE(stash.take(1, {a.t()}));          // other strides
  CHECK_FALSE(stash.take(1, {a.narrow(0, 1, 2)}));  // other offset and sizes
  a.add_(1);  // version bump
  CHECK_FALSE(stash.take(1, {a}));
  CHECK(stash.size() == 1);  // still there (evicted only by pruning, capacity or take)
}

TEST_CASE("forward_stash: entries of freed arguments are dropped; the store is bounded",
          "[forward_stash]") {
  ForwardStash stash(3);
  {
    const at::Tensor gone = at::randn({64});
    stash.put(1, {gone}, {at::ones({1})});
  }
  const at::Tensor kept = at::randn({64});
  stash.put(1, {kept}, {at::ones({1})});
  CHECK(stash.size() == 1);  // the freed argument's entry was pruned by this put
  // A new tensor the allocator may place where the freed one was never matches an old key.
  for (int i = 0; i < 8; ++i) {
    const at::Tensor fresh = at::randn({64});
    CHECK_FALSE(stash.take(2, {fresh}));
  }
  // The tensor the forward was handed died, its storage lives on (another view of it, or the
  // entry's own alias): no backward can be handed that tensor any more — pruned too.
  {
    const at::Tensor view = kept.view({8, 8});
    stash.put(4, {view}, {kept.detach()});
  }
  stash.put(1, {at::randn({2})}, {at::ones({1})});
  CHECK_FALSE(stash.take(4, {kept.view({8, 8})}));
  std::vector<at::Tensor> live;
  for (int i = 0; i < 5; ++i) {
    live.push_back(at::randn({8}));
    stash.put(3, {live.back()}, {at::ones({1})});
  }
  CHECK(stash.size() == 3);
  CHECK_FALSE(stash.take(3, {live[0]}));  // the oldest were evicted
  CHECK(stash.take(3, {live[4]}));
}

TEST_CASE("forward_stash: a later forward on the same places supersedes; forget drops",
          "[forward_stash]") {
  ForwardStash stash(8);
  const at::Tensor a = at::randn({4});
  const at::Tensor first = at::ones({1}), second = at::zeros({1});
  stash.put(1, {a}, {first});
  stash.put(2, {a}, {first});  // another tag: kept apart
  stash.put(1, {a}, {second});
  CHECK(stash.size() == 2);
  auto got = stash.take(1, {a});
  REQUIRE(got);
  CHECK((*got)[0].is_same(second));
  stash.put(1, {a}, {first});
  stash.forget(1, {a.detach()});
  CHECK_FALSE(stash.take(1, {a}));
  CHECK(stash.take(2, {a}));
}

TEST_CASE("forward_stash: inference tensors (no version counter) are never kept",
          "[forward_stash]") {
  ForwardStash stash(3);
  at::Tensor t;
  {
    c10::InferenceMode guard;
    t = at::randn({3});
  }
  CHECK_FALSE(TensorKey::of(t));
  CHECK_FALSE(TensorKey::of(at::Tensor()));
  stash.put(1, {t}, {at::ones({1})});
  CHECK(stash.size() == 0);
}

}  // namespace pt2rt
