// distributed/sampler.cpp — DistributedSampler's split of an epoch (pt2rt/distributed_sampler.h).
#include "pt2rt/distributed_sampler.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pt2rt/errors.h"

namespace pt2rt::distributed {

int64_t samples_per_rank(int64_t n, int world_size) {
  if (n < 0) throw InputError("samples_per_rank: sample count " + std::to_string(n) + " < 0");
  if (world_size < 1) {
    throw InputError("samples_per_rank: world size " + std::to_string(world_size) + " < 1");
  }
  return (n + world_size - 1) / world_size;
}

at::Tensor shard_indices(const at::Tensor& permutation, int rank, int world_size) {
  if (!permutation.defined() || permutation.dim() != 1 ||
      permutation.scalar_type() != at::kLong) {
    throw InputError("shard_indices: the permutation must be a 1-D int64 tensor, got " +
                     (permutation.defined()
                          ? std::string(c10::toString(permutation.scalar_type())) + " " +
                                c10::str(permutation.sizes())
                          : std::string("an undefined tensor")));
  }
  const int64_t n = permutation.size(0);
  const int64_t total = samples_per_rank(n, world_size) * world_size;
  if (rank < 0 || rank >= world_size) {
    throw InputError("shard_indices: rank " + std::to_string(rank) + " is outside [0, " +
                     std::to_string(world_size) + ")");
  }
  std::vector<at::Tensor> pieces{permutation};
  for (int64_t have = n; have < total; have += n) {  // n < world size: the head repeats
    pieces.push_back(permutation.slice(0, 0, std::min(n, total - have)));
  }
  const at::Tensor padded = pieces.size() == 1 ? permutation : at::cat(pieces);
  return padded.slice(0, rank, total, world_size).contiguous();
}

}  // namespace pt2rt::distributed
