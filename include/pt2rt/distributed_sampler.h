// pt2rt/distributed_sampler.h — which samples of an epoch each rank of a data-parallel job
// trains on, as torch.utils.data.distributed.DistributedSampler(shuffle=True, drop_last=False)
// splits them (https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler).
// Library pt2rt::distributed; needs no process group (pure index arithmetic).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace pt2rt::distributed {

/// Samples per rank per epoch out of `n`: ceil(n / world_size) (DistributedSampler's
/// num_samples with drop_last=False). @throws InputError (n < 0, world_size < 1).
int64_t samples_per_rank(int64_t n, int world_size);

/// Rank `rank`'s share of an epoch's `permutation` (int64 [n], the same on every rank, e.g.
/// at::randperm(n, generator) with one seed everywhere): the permutation padded by wrapping
/// around (its head appended, repeatedly when n < world_size) to
/// samples_per_rank(n, world_size) * world_size indices, then positions rank, rank +
/// world_size, rank + 2 * world_size, ... Every rank gets samples_per_rank(n, world_size)
/// indices (int64, contiguous; with one rank, `permutation` itself), every index at least
/// once over the ranks — so batches of the same size on every rank make the mean of the
/// ranks' mean gradients the mean over the global batch, as DistributedDataParallel assumes.
/// @throws InputError (permutation not 1-D int64, world_size < 1, rank outside
///   [0, world_size)).
at::Tensor shard_indices(const at::Tensor& permutation, int rank, int world_size);

}  // namespace pt2rt::distributed
