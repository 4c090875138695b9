// cli/distributed_train.h — data-parallel `export-cli train` (pt2rt/distributed.h): the local
// launcher (--nproc-per-node) and the per-rank hooks cmd_train.cpp calls.
//
//   export-cli train model.pt2 --data train.pt --nproc-per-node 2 ...     N local workers
//   RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. export-cli train ...   (torchrun's
//   variables, or --rank/--world-size/--master-addr/--master-port) joins a multi-machine job.
//
// --batch-size is per rank (as with DDP). Each epoch's shuffled permutation (the same seed on
// every rank) is split as torch.utils.data.DistributedSampler(shuffle, drop_last=False) does:
// padded by repeating its head to a multiple of the world size, rank r taking positions
// r, r + W, r + 2W, ... Only rank 0 prints (the others' stdout is discarded) and saves; the
// train loss is the mean over all ranks' steps. Eval is sharded: with the parameters every
// rank shares and rank 0's buffers (broadcast first), rank r evaluates eval batches r, r + W,
// ... and the sums of loss and correct counts are all-reduced, so rank 0 prints the figures
// one process would print, for the model it saves.
#pragma once

#include <cxxopts.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "pt2rt/model.h"

namespace pt2rt::cli {

/// Adds --nproc-per-node, --rank, --world-size, --master-addr, --master-port, --dist-timeout,
/// --no-grad-overlap.
void add_distributed_options(cxxopts::Options& options);

/// With --nproc-per-node N > 1 in a process that is not itself a rank (no RANK/WORLD_SIZE in
/// the environment and no --rank): starts N copies of this program (fork/exec, argv unchanged)
/// with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, MASTER_PORT (--master-port or a
/// free port) set, waits for them, and returns the exit code: 0 when all succeed, else the first
/// failure's (a rank that dies: the others are given --dist-timeout to fail on their own, then
/// killed). std::nullopt: not a launcher, train in this process.
std::optional<int> launch_local_workers(const cxxopts::ParseResult& result, int argc,
                                        char** argv);

/// The device a rank trains on: `requested`, except that --device cuda without an index in a
/// rank (LOCAL_RANK in the environment, as --nproc-per-node and torchrun set it) is
/// cuda:<LOCAL_RANK mod the visible CUDA devices> — one GPU per rank where there are enough,
/// ranks sharing GPUs otherwise (their gradients all-reduced by Gloo through host memory).
/// @throws UsageError for a LOCAL_RANK that is not a non-negative integer.
c10::Device rank_device(c10::Device requested);

/// One rank's view of a data-parallel job; inactive (world size 1, every hook a no-op) when
/// no distributed option or variable is given.
class DistributedTraining {
 public:
  /// Joins the job (when requested) and broadcasts `model`'s parameters and buffers from
  /// rank 0. Non-zero ranks' std::cout is discarded from here on.
  /// @throws distributed::DistributedError (exit 2: rendezvous failed), UsageError.
  DistributedTraining(const cxxopts::ParseResult& result, Model& model);
  ~DistributedTraining();

  bool active() const;
  int rank() const;
  int world_size() const;
  /// Samples this rank trains on per epoch out of `n` (ceil(n / world size)).
  int64_t local_count(int64_t n) const;
  /// This rank's shard of an epoch's permutation of `n` indices (DistributedSampler:
  /// distributed::shard_indices, pt2rt/distributed_sampler.h).
  at::Tensor shard(const at::Tensor& permutation) const;
  /// model.forward, after the buffer broadcast (DDP's broadcast_buffers=True).
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs);
  /// Before a backward: whether it launches the gradient all-reduce (false: it only
  /// accumulates, DDP's no_sync(); the last backward before average_gradients() syncs).
  void set_gradient_sync(bool sync);
  /// After loss.backward(): gradients averaged over the ranks.
  void average_gradients();
  /// Before evaluation: buffers from rank 0 (every rank then evaluates rank 0's model, its
  /// shard of the eval batches).
  void sync_for_eval();
  /// In-place sum over the ranks of `values` (float64; exact for counts below 2^53).
  /// @throws distributed::DistributedError (a lost peer).
  void sum_over_ranks(std::vector<double>& values, const std::string& what);
  /// Mean over every rank's steps of the per-step losses (sum of `loss_sum`, sum of `steps`).
  double global_mean_loss(double loss_sum, int64_t steps);
  /// Whether this process writes --save (rank 0).
  bool saves() const;
  /// Prints (rank 0, when active) the gradient all-reduce's share of `total_s` seconds.
  void report(double total_s) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace pt2rt::cli
