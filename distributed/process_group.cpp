// distributed/process_group.cpp — Rendezvous and ProcessGroup (pt2rt/distributed.h) over
// c10d's TCPStore / FileStore and ProcessGroupGloo or ProcessGroupNCCL (nccl_backend.h).
#include <c10/util/Exception.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

#include "c10d_compat.h"
#include "heartbeat.h"
#include "nccl_backend.h"
#include "pt2rt/distributed.h"

namespace pt2rt::distributed {
namespace {

using Kind = DistributedError::Kind;

std::string message_of(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

/// A write to the socket of a peer that died raises SIGPIPE (Gloo's TCP pairs write with
/// writev, which cannot pass MSG_NOSIGNAL), whose default action kills the writer: the
/// survivor would die instead of reporting the lost rank. The CPython interpreter ignores
/// SIGPIPE at startup, so PyTorch's Python users never see this; a C++ process joining a group
/// does the same unless the application installed its own disposition.
void ignore_default_sigpipe() {
  struct sigaction current {};
  if (::sigaction(SIGPIPE, nullptr, &current) != 0) return;
  if (current.sa_handler != SIG_DFL) return;  // the application's choice stands
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, nullptr);
}

int env_int(const char* name, int lo, int hi) {
  const char* v = env(name);
  if (v == nullptr) {
    throw DistributedError(Kind::Rendezvous, std::string("environment variable ") + name +
                                                 " is not set (torchrun sets RANK, WORLD_SIZE, "
                                                 "MASTER_ADDR, MASTER_PORT)");
  }
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi) {
    throw DistributedError(Kind::Rendezvous, std::string("environment variable ") + name + "='" +
                                                 v + "' is not an integer in [" +
                                                 std::to_string(lo) + ", " + std::to_string(hi) +
                                                 "]");
  }
  return static_cast<int>(x);
}

bool is_loopback(const std::string& addr) {
  return addr.empty() || addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

std::shared_ptr<::gloo::transport::Device> make_device(const Rendezvous& where,
                                                       const GroupOptions& options) {
  using PG = c10d::ProcessGroupGloo;
  if (!options.local_address.empty()) return PG::createDeviceForHostname(options.local_address);
  if (!where.file_path.empty() || is_loopback(where.master_addr)) {
    return PG::createDeviceForHostname("127.0.0.1");
  }
  if (const char* ifname = env("GLOO_SOCKET_IFNAME")) return PG::createDeviceForInterface(ifname);
  return PG::createDefaultDevice();
}

}  // namespace

const char* backend_name(Backend backend) { return backend == Backend::Nccl ? "NCCL" : "Gloo"; }

bool nccl_available() { return nccl_built(); }

Backend auto_backend(bool on_cuda, int64_t local_ranks, int64_t gpus) {
  return on_cuda && nccl_available() && local_ranks >= 1 && local_ranks <= gpus ? Backend::Nccl
                                                                                : Backend::Gloo;
}

bool Rendezvous::env_present() { return env("WORLD_SIZE") != nullptr && env("RANK") != nullptr; }

Rendezvous Rendezvous::from_env() {
  Rendezvous r;
  r.world_size = env_int("WORLD_SIZE", 1, 1 << 20);
  r.rank = env_int("RANK", 0, r.world_size - 1);
  const char* addr = env("MASTER_ADDR");
  if (addr == nullptr) {
    throw DistributedError(Kind::Rendezvous,
                           "environment variable MASTER_ADDR is not set (torchrun sets RANK, "
                           "WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
  }
  r.master_addr = addr;
  r.master_port = env_int("MASTER_PORT", 1, 65535);
  return r;
}

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<compat::Backend> pg;  ///< ProcessGroupGloo or ProcessGroupNCCL
  Backend backend = Backend::Gloo;
  c10::Device device = c10::kCPU;  ///< NCCL: the rank's GPU (CPU tensors are staged there)
  int rank = 0;
  int size = 1;
  std::chrono::milliseconds timeout{0};
  std::vector<c10::intrusive_ptr<c10d::Work>> started;  ///< start_all_reduce_sum, not waited
  bool tcp = false;                      ///< a TCPStore (rank 0 serves it), else a FileStore
  std::unique_ptr<Heartbeat> heartbeat;  ///< more than one rank; stopped before the store goes

  /// Rethrows a collective's failure as one DistributedError line naming the lost rank(s):
  /// those whose heartbeat stopped (heartbeat.h), else in a two-rank job the other one.
  [[noreturn]] void fail(const std::string& what, const std::exception& e) {
    std::string lost = heartbeat ? heartbeat->lost_ranks(tcp) : "";
    if (lost.empty()) {
      lost = size == 2 ? "rank " + std::to_string(1 - rank)
                       : "a peer rank (of " + std::to_string(size) + ")";
    }
    throw DistributedError(
        Kind::Collective, "rank " + std::to_string(rank) + ": " + what + " failed: lost " + lost +
                              " (it died, hung past the " + std::to_string(timeout.count()) +
                              " ms timeout or disconnected): " + message_of(e));
  }

  /// `t` where the backend can reduce it: NCCL takes CUDA tensors only, so a CPU tensor
  /// (the evaluation's sums, say) is staged through the rank's GPU; copy_back() returns it.
  bool staged(const at::Tensor& t) const { return backend == Backend::Nccl && !t.is_cuda(); }
  at::Tensor placed(const at::Tensor& t) const { return staged(t) ? t.to(device) : t; }
  static void copy_back(std::vector<at::Tensor>& originals, const std::vector<at::Tensor>& used) {
    for (size_t i = 0; i < originals.size(); ++i) {
      if (!used[i].is_same(originals[i])) originals[i].copy_(used[i]);
    }
  }

  void wait_all(std::vector<c10::intrusive_ptr<c10d::Work>>& works, const std::string& what) {
    std::exception_ptr first;
    for (auto& w : works) {  // every Work is waited, even after one failed
      try {
        w->wait();
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) {
      try {
        std::rethrow_exception(first);
      } catch (const std::exception& e) {
        fail(what, e);
      }
    }
  }
};

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ProcessGroup::ProcessGroup(ProcessGroup&&) noexcept = default;
ProcessGroup& ProcessGroup::operator=(ProcessGroup&&) noexcept = default;
ProcessGroup::~ProcessGroup() = default;

ProcessGroup ProcessGroup::join(const Rendezvous& where, const GroupOptions& options) {
  if (where.world_size < 1 || where.rank < 0 || where.rank >= where.world_size) {
    throw DistributedError(Kind::Rendezvous, "rank " + std::to_string(where.rank) +
                                                 " is not in [0, world size " +
                                                 std::to_string(where.world_size) + ")");
  }
  if (options.backend == Backend::Nccl) {
    if (!nccl_available()) {
      throw InputError("the NCCL backend: this pt2rt_distributed was built without NCCL (it "
                       "needs a CUDA LibTorch and NCCL's nccl.h: docs/distributed.md); use Gloo");
    }
    if (!options.device.is_cuda() || !options.device.has_index()) {
      throw InputError("the NCCL backend needs this rank's GPU as GroupOptions::device (cuda:N), "
                       "got " + options.device.str());
    }
  }
  ignore_default_sigpipe();
  auto impl = std::make_unique<Impl>();
  impl->rank = where.rank;
  impl->size = where.world_size;
  impl->timeout = options.timeout;
  const std::string me = "rank " + std::to_string(where.rank) + " of " +
                         std::to_string(where.world_size);
  std::string store_desc;
  try {
    if (!where.file_path.empty()) {
      store_desc = "FileStore " + where.file_path;
      impl->store = c10::make_intrusive<c10d::FileStore>(where.file_path, where.world_size);
    } else {
      if (where.master_addr.empty() || where.master_port < 1 || where.master_port > 65535) {
        throw DistributedError(Kind::Rendezvous, me + ": no master address/port (MASTER_ADDR, "
                                                      "MASTER_PORT 1..65535)");
      }
      impl->tcp = true;
      store_desc = "TCPStore " + where.master_addr + ":" + std::to_string(where.master_port);
      c10d::TCPStoreOptions o;
      o.port = static_cast<std::uint16_t>(where.master_port);
      o.isServer = where.rank == 0;
      o.numWorkers = static_cast<std::size_t>(where.world_size);
      o.waitWorkers = false;  // ProcessGroupGloo's own rendezvous waits for every rank
      o.timeout = options.timeout;
      compat::tcp_store_without_libuv(o, 0);
      impl->store = c10::make_intrusive<c10d::TCPStore>(where.master_addr, o);
    }
    impl->store->setTimeout(options.timeout);
  } catch (const DistributedError&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(Kind::Rendezvous,
                           me + ": cannot " +
                               (where.rank == 0 && where.file_path.empty() ? "serve " : "reach ") +
                               store_desc + ": " + message_of(e));
  }
  impl->backend = options.backend;
  impl->device = options.device;
  try {
    if (options.backend == Backend::Nccl) {
      impl->pg = make_nccl_backend(impl->store, where.rank, where.world_size, options.timeout,
                                   options.device);
    } else {
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
      gloo_options->devices.push_back(make_device(where, options));
      impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(impl->store, where.rank,
                                                             where.world_size, gloo_options);
    }
  } catch (const std::exception& e) {
    throw DistributedError(Kind::Rendezvous, me + ": " + backend_name(options.backend) +
                                                 " rendezvous through " + store_desc +
                                                 " failed within " +
                                                 std::to_string(options.timeout.count()) +
                                                 " ms (every rank must join): " + message_of(e));
  }
  if (where.world_size > 1) {  // every rank has joined: from here a silent counter is lost
    const auto interval = std::clamp(options.timeout / 20, std::chrono::milliseconds(50),
                                     std::chrono::milliseconds(1000));
    impl->heartbeat = std::make_unique<Heartbeat>(*impl->store, where.rank, where.world_size,
                                                  interval);
  }
  return ProcessGroup(std::move(impl));
}

int ProcessGroup::rank() const { return impl_->rank; }
int ProcessGroup::size() const { return impl_->size; }
std::chrono::milliseconds ProcessGroup::timeout() const { return impl_->timeout; }
Backend ProcessGroup::backend() const { return impl_->backend; }
c10::Device ProcessGroup::device() const { return impl_->device; }

void ProcessGroup::all_reduce_sum(std::vector<at::Tensor>& tensors, const std::string& what) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  works.reserve(tensors.size());
  std::vector<at::Tensor> used;
  try {
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{impl_->placed(t)};
      used.push_back(one[0]);
      works.push_back(impl_->pg->allreduce(one, c10d::AllreduceOptions()));
    }
  } catch (const std::exception& e) {
    impl_->fail(what, e);
  }
  impl_->wait_all(works, what);
  Impl::copy_back(tensors, used);
}

void ProcessGroup::start_all_reduce_sum(at::Tensor& tensor, const std::string& what) {
  if (impl_->staged(tensor)) {
    throw InputError("the NCCL backend reduces CUDA tensors in place; got one on " +
                     tensor.device().str());
  }
  try {
    std::vector<at::Tensor> one{tensor};
    impl_->started.push_back(impl_->pg->allreduce(one, c10d::AllreduceOptions()));
  } catch (const std::exception& e) {
    impl_->fail(what, e);
  }
}

void ProcessGroup::wait_started(const std::string& what) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works = std::move(impl_->started);
  impl_->started.clear();
  impl_->wait_all(works, what);
}

void ProcessGroup::broadcast(std::vector<at::Tensor>& tensors, int root,
                             const std::string& what) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  works.reserve(tensors.size());
  std::vector<at::Tensor> used;
  try {
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{impl_->placed(t)};
      used.push_back(one[0]);
      c10d::BroadcastOptions o;
      o.rootRank = root;
      works.push_back(impl_->pg->broadcast(one, o));
    }
  } catch (const std::exception& e) {
    impl_->fail(what, e);
  }
  impl_->wait_all(works, what);
  Impl::copy_back(tensors, used);
}

void ProcessGroup::barrier(const std::string& what) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  try {
    works.push_back(impl_->pg->barrier(c10d::BarrierOptions()));
  } catch (const std::exception& e) {
    impl_->fail(what, e);
  }
  impl_->wait_all(works, what);
}

}  // namespace pt2rt::distributed
