// tests/cpp/distributed/test_sampler.cpp — pt2rt::distributed::shard_indices and
// samples_per_rank against torch.utils.data.DistributedSampler(drop_last=False)'s split,
// worked out by hand (its __iter__: indices += indices[:padding] repeated,
// indices[rank:total_size:num_replicas]).
#include "catch_compat.h"

#include <ATen/ATen.h>

#include <vector>

#include "pt2rt/distributed_sampler.h"
#include "pt2rt/errors.h"

using namespace pt2rt::distributed;
using pt2rt::test::Contains;

namespace {

std::vector<int64_t> values(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

at::Tensor longs(std::vector<int64_t> v) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong));
}

}  // namespace

TEST_CASE("samples_per_rank is ceil(n / world size)", "[sampler]") {
  CHECK(samples_per_rank(80, 2) == 40);
  CHECK(samples_per_rank(81, 2) == 41);
  CHECK(samples_per_rank(1, 3) == 1);
  CHECK(samples_per_rank(0, 4) == 0);
  CHECK_THROWS_WITH(samples_per_rank(5, 0), Contains("world size 0 < 1"));
  CHECK_THROWS_AS(samples_per_rank(-1, 2), pt2rt::InputError);
}

TEST_CASE("shard_indices pads by wrapping around and strides by the world size", "[sampler]") {
  const at::Tensor perm = longs({4, 2, 0, 3, 1});  // padded: 4 2 0 3 1 4
  CHECK(values(shard_indices(perm, 0, 2)) == std::vector<int64_t>{4, 0, 1});
  CHECK(values(shard_indices(perm, 1, 2)) == std::vector<int64_t>{2, 3, 4});
  // 3 ranks: 4 2 0 3 1 4 -> rank 2 takes positions 2, 5
  CHECK(values(shard_indices(perm, 2, 3)) == std::vector<int64_t>{0, 4});
  // one rank: the permutation unchanged; an even split: no padding
  CHECK(values(shard_indices(perm, 0, 1)) == values(perm));
  CHECK(values(shard_indices(longs({5, 1, 3, 0}), 1, 2)) == std::vector<int64_t>{1, 0});
}

TEST_CASE("shard_indices repeats the head when there are fewer samples than ranks",
          "[sampler]") {
  const at::Tensor perm = longs({7, 3});  // world 5: 7 3 7 3 7
  std::vector<int64_t> got;
  for (int r = 0; r < 5; ++r) {
    const at::Tensor s = shard_indices(perm, r, 5);
    REQUIRE(s.size(0) == 1);
    got.push_back(values(s)[0]);
  }
  CHECK(got == std::vector<int64_t>{7, 3, 7, 3, 7});
  CHECK(shard_indices(longs({}), 1, 3).size(0) == 0);
}

TEST_CASE("shard_indices rejects a bad permutation or rank", "[sampler]") {
  const at::Tensor perm = longs({0, 1, 2});
  CHECK_THROWS_WITH(shard_indices(perm, 2, 2), Contains("rank 2 is outside [0, 2)"));
  CHECK_THROWS_WITH(shard_indices(perm, -1, 2), Contains("rank -1"));
  CHECK_THROWS_AS(shard_indices(perm, 0, 0), pt2rt::InputError);
  CHECK_THROWS_WITH(shard_indices(perm.to(at::kInt), 0, 2), Contains("1-D int64"));
  CHECK_THROWS_WITH(shard_indices(perm.view({1, 3}), 0, 2), Contains("[1, 3]"));
  CHECK_THROWS_WITH(shard_indices(at::Tensor(), 0, 2), Contains("undefined"));
}
