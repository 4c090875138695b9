// pt2rt/distributed.h — data-parallel training of a pt2rt::Model across processes (and
// machines) over c10d's Gloo or NCCL process group, the engine LibTorch ships
// (torch/csrc/distributed/c10d: ProcessGroupGloo, ProcessGroupNCCL, TCPStore, FileStore).
// Library pt2rt::distributed (target pt2rt_distributed): the core runtime does not depend on
// Gloo or NCCL.
//
// Semantics follow PyTorch's torch.nn.parallel.DistributedDataParallel
// (https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html):
//   * at construction, every parameter and buffer is broadcast from rank 0;
//   * each forward() first broadcasts the buffers from rank 0 (broadcast_buffers=True, the
//     DDP default: BatchNorm running statistics follow rank 0's);
//   * gradients are averaged over the ranks in buckets of at most bucket_bytes, in reverse
//     parameter order (the order backward produces them), as DDP's Reducer does: a hook on
//     each parameter's gradient accumulator (the AccumulateGrad node's post hook, the
//     mechanism c10d's Reducer itself uses) launches a bucket's asynchronous all-reduce SUM as
//     soon as all its gradients are in `.grad`, so the all-reduce overlaps the rest of the
//     backward; average_gradients() (after loss.backward(), before optimizer.step()) launches
//     what is left, waits for every bucket, divides by the world size and writes each
//     trainable parameter's .grad — DDP's result for a loss that is a mean over each rank's
//     batch. Then any torch::optim optimizer steps identically on every rank.
//   * set_gradient_sync(false) is DDP's no_sync(): the backward passes accumulate locally
//     and launch nothing; the backward after set_gradient_sync(true) launches the buckets of
//     the accumulated gradients.
//
// Rendezvous follows torchrun's environment conventions (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT: https://pytorch.org/docs/stable/elastic/run.html) with a c10d TCPStore that
// rank 0 serves, or a FileStore path shared by the ranks (one machine or a shared file system).
//
// Errors: DistributedError (pt2rt/errors.h style) for a failed rendezvous (port in use,
// master unreachable, a rank that never joins within the timeout) and for a collective that
// fails or times out (a peer that died or hangs): the message names this rank, the operation
// and the lost rank(s) — those whose heartbeat counter in the store stopped (every rank bumps
// pt2rt/heartbeat/<rank> every timeout/20, 50 ms..1 s; naming takes 2.5 such intervals after
// the failure), or in a two-rank job the other one. `kind()` tells setup failures from lost
// peers.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pt2rt/errors.h"
#include "pt2rt/model.h"

namespace pt2rt::distributed {

class DistributedError : public Error {
 public:
  enum class Kind {
    Rendezvous,  ///< store or process-group setup failed (port in use, master unreachable,
                 ///< bad rank/world size, a rank missing at the rendezvous timeout)
    Collective,  ///< a collective failed or timed out: a peer died, hung or disconnected
  };
  DistributedError(Kind kind, const std::string& what)
      : Error("pt2rt::DistributedError: ", what), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

/// The c10d backend that carries a ProcessGroup's collectives.
enum class Backend {
  Gloo,  ///< c10d::ProcessGroupGloo: CPU tensors, and CUDA tensors staged through host memory
  Nccl,  ///< c10d::ProcessGroupNCCL: CUDA tensors, GPU to GPU; one GPU per rank (NCCL refuses
         ///< two ranks on one device). Built where LibTorch has CUDA and NCCL's header was
         ///< found (nccl_available()); CPU tensors handed to a collective are staged through
         ///< the rank's GPU.
};

/// "Gloo" or "NCCL".
const char* backend_name(Backend backend);

/// Whether this build of pt2rt_distributed has c10d's NCCL backend (a CUDA LibTorch, nccl.h).
bool nccl_available();

/// The backend an automatic choice picks (export-cli train --dist-backend auto): NCCL when the
/// model is on CUDA, nccl_available(), and every one of the `local_ranks` processes on this
/// machine has a GPU of its own (1 <= local_ranks <= `gpus`, the visible CUDA devices; NCCL
/// refuses two ranks on one device), as torchrun users pick it; else Gloo.
Backend auto_backend(bool on_cuda, int64_t local_ranks, int64_t gpus);

struct GroupOptions {
  /// Rendezvous deadline and the timeout of every collective (c10d ProcessGroupGloo::Options
  /// timeout): a peer that died or hangs fails the others after at most this long.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  Backend backend = Backend::Gloo;
  /// Backend::Nccl: this rank's GPU (a CUDA device with an index), bound at the rendezvous
  /// (ProcessGroupNCCL::Options::device_id: the communicator is made eagerly there).
  c10::Device device = c10::kCPU;
  /// Address Gloo binds its connections to. Empty: 127.0.0.1 when the master address is a
  /// loopback address (or for a FileStore), else the interface named by GLOO_SOCKET_IFNAME
  /// when set, else this host's name (c10d's createDefaultDevice, as torch.distributed).
  std::string local_address;
};

/// Where the ranks meet: a TCPStore at master_addr:master_port (rank 0 serves it), or a
/// FileStore at file_path (a fresh path per job: c10d's FileStore reuses an existing file).
struct Rendezvous {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;   ///< TCPStore host (rank 0 listens on it)
  int master_port = 0;       ///< TCPStore port, 1..65535
  std::string file_path;     ///< FileStore path; used instead of TCP when not empty

  /// From torchrun's variables RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
  /// @throws DistributedError (Rendezvous) naming a missing or malformed variable.
  static Rendezvous from_env();
  /// Whether WORLD_SIZE and RANK are set in the environment (a torchrun-launched process).
  static bool env_present();
};

/// A process group of `world_size` ranks (c10d::ProcessGroupGloo or ProcessGroupNCCL over the
/// store). Movable, not copyable; collectives must be called in the same order on every rank.
class ProcessGroup {
 public:
  /// Joins the group: connects to (rank 0: serves) the store and builds the Gloo pairs or
  /// the NCCL communicator.
  /// Blocks until every rank has joined or options.timeout passes. Sets SIGPIPE to SIG_IGN
  /// when its disposition is the default (as the CPython interpreter does at startup), so
  /// that a write to a dead peer's socket is an error naming the lost rank, not the death of
  /// this process; an application's own SIGPIPE handler is left in place.
  /// @throws DistributedError (Rendezvous); InputError for Backend::Nccl without a CUDA
  ///   `options.device` or where !nccl_available().
  static ProcessGroup join(const Rendezvous& where, const GroupOptions& options = {});

  ProcessGroup(ProcessGroup&&) noexcept;
  ProcessGroup& operator=(ProcessGroup&&) noexcept;
  ~ProcessGroup();

  int rank() const;
  int size() const;
  std::chrono::milliseconds timeout() const;
  Backend backend() const;
  /// Backend::Nccl: the GPU the group is bound to (GroupOptions::device); CPU for Gloo.
  c10::Device device() const;

  /// In-place sum over the ranks of each tensor (contiguous, same shapes everywhere; CPU or,
  /// with either backend, CUDA), all launched before any is waited. @throws DistributedError
  /// (Collective).
  void all_reduce_sum(std::vector<at::Tensor>& tensors, const std::string& what);
  /// Launches an in-place sum over the ranks of `tensor` (as all_reduce_sum) without waiting:
  /// the tensor must stay alive and untouched until wait_started(). Collectives started this
  /// way run in launch order, which must be the same on every rank.
  /// @throws DistributedError (Collective) when the launch itself fails.
  void start_all_reduce_sum(at::Tensor& tensor, const std::string& what);
  /// Waits for every collective start_all_reduce_sum launched (all of them, even after one
  /// failed). @throws DistributedError (Collective).
  void wait_started(const std::string& what);
  /// In-place broadcast of each tensor from `root`. @throws DistributedError (Collective).
  void broadcast(std::vector<at::Tensor>& tensors, int root, const std::string& what);
  /// Waits for every rank. @throws DistributedError (Collective).
  void barrier(const std::string& what);

 private:
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct DataParallelOptions {
  /// Most bytes of gradient per all-reduce bucket (DDP's bucket_cap_mb default: 25 MiB).
  int64_t bucket_bytes = 25 * 1024 * 1024;
  /// Broadcast buffers from rank 0 at every forward (DDP's broadcast_buffers=True).
  bool broadcast_buffers = true;
  /// Launch each bucket during the backward as soon as its gradients are ready (true), or
  /// every bucket after the backward in average_gradients() (false; for comparison).
  bool overlap = true;
};

/// DistributedDataParallel for a pt2rt::Model (see the file comment). Holds references to
/// `model` and `group`: both must outlive it. CPU or CUDA models: over Gloo, c10d's
/// ProcessGroupGloo all-reduces CUDA tensors by staging them through pinned host memory on
/// its own stream (ordered after the producing stream by CUDA events), so ranks may share one
/// GPU; over NCCL (CUDA models only, one GPU per rank) ProcessGroupNCCL reduces them GPU to
/// GPU on its own stream, ordered after the producing stream and before the optimizer's.
/// One GPU per rank is export-cli's choice (LOCAL_RANK, as torchrun's).
class DataParallel {
 public:
  /// Broadcasts every parameter and buffer from rank 0 and (options.overlap, more than one
  /// rank) adds a post hook to each trainable parameter's gradient accumulator.
  /// @throws DistributedError, InputError (a model on neither the CPU nor CUDA; over NCCL, a
  ///   model on another device than the group's GPU).
  DataParallel(Model& model, ProcessGroup& group, DataParallelOptions options = {});
  /// Removes the hooks; buckets still in flight are waited (errors ignored).
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// Broadcasts the buffers from rank 0 (when options.broadcast_buffers and the model has
  /// any), then runs model.forward(inputs).
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs);
  /// Broadcasts the buffers from rank 0 (any mode; e.g. before evaluating rank 0's model).
  /// @throws DistributedError (Collective).
  void broadcast_buffers();
  /// After loss.backward(), before optimizer.step(): each trainable parameter's .grad
  /// becomes its mean over the ranks (a parameter without .grad on a rank counts as zeros).
  /// Buckets the backward launched are waited; a gradient that changed after its bucket was
  /// launched (a second backward without average_gradients() in between) makes every bucket
  /// all-reduce again from the current .grad values, so the result is always the mean of
  /// what .grad holds now. @throws DistributedError (Collective).
  void average_gradients();
  /// DDP's no_sync(): false — the following backward passes only accumulate into .grad;
  /// true (the default) — the next backward launches the buckets as gradients become ready.
  /// Every rank must make the same calls.
  void set_gradient_sync(bool sync) { sync_ = sync; }
  bool gradient_sync() const { return sync_; }

  /// Seconds spent in average_gradients() so far: the all-reduce time the backward did not
  /// hide (launching the buckets left, waiting, averaging).
  double all_reduce_seconds() const { return all_reduce_s_; }
  /// Seconds the gradient hooks spent during backward passes (flattening and launching).
  double launch_seconds() const { return launch_s_; }
  /// Buckets launched by the hooks during a backward (overlapped) so far.
  int64_t overlapped_buckets() const { return overlapped_buckets_; }
  /// The buckets: parameter indices (into model.parameters()) per bucket.
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }

 private:
  Model& model_;
  ProcessGroup& group_;
  DataParallelOptions options_;
  std::vector<at::Tensor> params_;  ///< trainable parameters, model order
  std::vector<std::vector<size_t>> buckets_;  ///< indices into params_
  struct Round;                  ///< the hooks and the buckets of the current step
  std::unique_ptr<Round> round_;
  bool sync_ = true;
  double all_reduce_s_ = 0.0;
  double launch_s_ = 0.0;
  int64_t overlapped_buckets_ = 0;

  void on_gradient_ready(size_t param);
  void launch(size_t bucket);
  void reset_round();
};

}  // namespace pt2rt::distributed
