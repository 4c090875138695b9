// cli/distributed_train.cpp — see distributed_train.h.
#include "distributed_train.h"

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <streambuf>
#include <string>
#include <thread>

#include "c10_logging_compat.h"
#include "cli.h"
#include "pt2rt/distributed.h"
#include "pt2rt/distributed_sampler.h"

namespace pt2rt::cli {
namespace dist = pt2rt::distributed;
namespace {

constexpr int kDefaultTimeoutS = 300;

/// A free TCP port on 127.0.0.1 (bound to port 0 by the kernel, then released).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw UsageError(std::string("--nproc-per-node: socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  if (!ok) throw UsageError("--nproc-per-node: no free port on 127.0.0.1 for the TCPStore");
  return ntohs(a.sin_port);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           ::strsignal(WTERMSIG(status)) + ")";
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

int timeout_s(const cxxopts::ParseResult& result) {
  const int t = result["dist-timeout"].as<int>();
  if (t <= 0) throw UsageError("--dist-timeout must be > 0 seconds");
  return t;
}

/// --dist-backend: gloo, nccl, or auto — NCCL where the model is on CUDA, this build has it
/// and every local rank has a GPU of its own (LOCAL_WORLD_SIZE, set by torchrun and
/// --nproc-per-node, else --world-size or WORLD_SIZE, at most the visible GPUs: NCCL refuses
/// two ranks on one device), else Gloo.
dist::Backend choose_backend(const cxxopts::ParseResult& result, c10::Device device) {
  const std::string name = result["dist-backend"].as<std::string>();
  if (name == "gloo") return dist::Backend::Gloo;
  if (name == "nccl") {
    if (!device.is_cuda()) {
      throw UsageError("--dist-backend nccl needs --device cuda (NCCL reduces GPU tensors)");
    }
    if (!dist::nccl_available()) {
      throw UsageError("--dist-backend nccl: this export-cli was built without NCCL (a CUDA "
                       "LibTorch and nccl.h are needed); use --dist-backend gloo");
    }
    return dist::Backend::Nccl;
  }
  if (name != "auto") {
    throw UsageError("--dist-backend: expected auto, gloo or nccl, got '" + name + "'");
  }
  // --world-size wins over WORLD_SIZE, as in the rendezvous (read here before the flags are
  // exported into the environment).
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  long ranks = 0;
  if (local != nullptr && *local != '\0') {
    ranks = std::strtol(local, nullptr, 10);
  } else if (result.count("world-size")) {
    ranks = result["world-size"].as<int>();
  } else if (const char* world = std::getenv("WORLD_SIZE")) {
    ranks = std::strtol(world, nullptr, 10);
  }
  return dist::auto_backend(device.is_cuda(), ranks,
                            device.is_cuda() ? torch::cuda::device_count() : 0);
}

class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c == EOF ? 0 : c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};

}  // namespace

void add_distributed_options(cxxopts::Options& options) {
  // clang-format off
  options.add_options("distributed")
      ("nproc-per-node", "data-parallel: start N local worker processes (over 127.0.0.1); "
                         "--batch-size is per process", cxxopts::value<int>()->default_value("1"))
      ("rank", "data-parallel: this process's rank (default: $RANK)", cxxopts::value<int>())
      ("world-size", "data-parallel: number of processes (default: $WORLD_SIZE)",
       cxxopts::value<int>())
      ("master-addr", "data-parallel: host of rank 0's TCPStore (default: $MASTER_ADDR)",
       cxxopts::value<std::string>())
      ("master-port", "data-parallel: port of rank 0's TCPStore (default: $MASTER_PORT; with "
                      "--nproc-per-node a free port)", cxxopts::value<int>())
      ("dist-timeout", "data-parallel: seconds before a missing, dead or hung peer fails the job",
       cxxopts::value<int>()->default_value(std::to_string(kDefaultTimeoutS)))
      ("no-grad-overlap", "data-parallel: all-reduce the gradient buckets after the backward "
                          "instead of during it (for comparison)")
      ("dist-backend", "data-parallel: c10d backend, gloo, nccl (CUDA, one GPU per rank) or "
                       "auto (NCCL when each local rank has a GPU of its own, else Gloo)",
       cxxopts::value<std::string>()->default_value("auto"));
  // clang-format on
}

c10::Device rank_device(c10::Device requested) {
  const char* local = std::getenv("LOCAL_RANK");
  if (!requested.is_cuda() || requested.has_index() || local == nullptr) return requested;
  char* end = nullptr;
  const long rank = std::strtol(local, &end, 10);
  if (*local == '\0' || *end != '\0' || rank < 0 || rank > 1000000) {
    throw UsageError(std::string("LOCAL_RANK: expected a non-negative integer, got '") + local +
                     "'");
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (count <= 0) return requested;  // parse_device refused CUDA already where there is none
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(rank % count));
}

std::optional<int> launch_local_workers(const cxxopts::ParseResult& result, int argc,
                                        char** argv) {
  const int nproc = result["nproc-per-node"].as<int>();
  if (nproc < 1) throw UsageError("--nproc-per-node must be >= 1");
  if (nproc == 1 || dist::Rendezvous::env_present() || result.count("rank")) return std::nullopt;
  if (result.count("world-size") || result.count("master-addr")) {
    throw UsageError("--nproc-per-node starts a one-machine job: it takes no --world-size or "
                     "--master-addr (use torchrun's variables or --rank/--world-size/"
                     "--master-addr/--master-port on each machine instead)");
  }
  const int port = result.count("master-port") ? result["master-port"].as<int>() : free_port();
  const int wait_s = timeout_s(result);
  std::vector<std::string> args{"/proc/self/exe"};
  for (int i = 0; i < argc; ++i) args.emplace_back(argv[i]);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  std::cout << std::flush;
  std::cerr << std::flush;

  std::vector<pid_t> pids(nproc, -1);
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) {
        if (p > 0) ::kill(p, SIGKILL);
      }
      throw UsageError(std::string("--nproc-per-node: fork failed: ") + std::strerror(errno));
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the launcher gone: no orphaned rank
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::execv(cargs[0], cargs.data());
      std::fprintf(stderr, "export-cli train: cannot start rank %d: %s\n", r, std::strerror(errno));
      ::_exit(127);
    }
    pids[r] = pid;
  }

  int exit_code = kExitOk;
  int running = nproc;
  bool failed = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int rank = -1;
      for (int r = 0; r < nproc; ++r) {
        if (pids[r] == pid) rank = r;
      }
      if (rank < 0) continue;
      pids[rank] = -1;
      --running;
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && !failed) {
        failed = true;
        exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitCheckFailed;
        std::cerr << "export-cli train: rank " << rank << " (pid " << pid << ") "
                  << describe_status(status);
        if (running > 0) {
          std::cerr << "; the other ranks get --dist-timeout (" << wait_s
                    << " s) to stop before they are killed";
        }
        std::cerr << std::endl;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < nproc; ++r) {
        if (pids[r] > 0) {
          std::cerr << "export-cli train: killing rank " << r << " (pid " << pids[r] << ")"
                    << std::endl;
          ::kill(pids[r], SIGKILL);
        }
      }
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return exit_code;
}

struct DistributedTraining::State {
  Model* model = nullptr;
  std::unique_ptr<dist::ProcessGroup> group;
  std::unique_ptr<dist::DataParallel> dp;
  NullBuffer null;
  std::streambuf* saved_cout = nullptr;
};

DistributedTraining::DistributedTraining(const cxxopts::ParseResult& result, Model& model)
    : state_(std::make_unique<State>()) {
  state_->model = &model;
  const bool requested = dist::Rendezvous::env_present() || result.count("rank") ||
                         result.count("world-size") || result.count("master-addr");
  // Checked in every run, so that a wrong --dist-backend is never silently ignored.
  const dist::Backend backend = choose_backend(result, model.device());
  if (!requested) return;
  quiet_c10_logging();
  // The flags override torchrun's variables; Rendezvous::from_env reads the result.
  if (result.count("rank")) ::setenv("RANK", std::to_string(result["rank"].as<int>()).c_str(), 1);
  if (result.count("world-size")) {
    ::setenv("WORLD_SIZE", std::to_string(result["world-size"].as<int>()).c_str(), 1);
  }
  if (result.count("master-addr")) {
    ::setenv("MASTER_ADDR", result["master-addr"].as<std::string>().c_str(), 1);
  }
  if (result.count("master-port")) {
    ::setenv("MASTER_PORT", std::to_string(result["master-port"].as<int>()).c_str(), 1);
  }
  dist::GroupOptions options;
  options.timeout = std::chrono::seconds(timeout_s(result));
  options.backend = backend;
  if (options.backend == dist::Backend::Nccl) {
    const c10::Device d = model.device();
    options.device = c10::Device(c10::kCUDA, d.has_index() ? d.index() : 0);
  }
  dist::Rendezvous where;
  try {
    where = dist::Rendezvous::from_env();
  } catch (const dist::DistributedError& e) {
    throw UsageError(e.message() + "; or give --rank, --world-size, --master-addr, --master-port");
  }
  state_->group = std::make_unique<dist::ProcessGroup>(dist::ProcessGroup::join(where, options));
  dist::DataParallelOptions dp_options;
  dp_options.overlap = result.count("no-grad-overlap") == 0;
  state_->dp = std::make_unique<dist::DataParallel>(model, *state_->group, dp_options);
  if (state_->group->rank() != 0) state_->saved_cout = std::cout.rdbuf(&state_->null);
  std::cout << "data-parallel: " << state_->group->size()
            << " processes (" << dist::backend_name(options.backend)
            << "); rank 0 prints and saves; --batch-size is per process\n";
}

DistributedTraining::~DistributedTraining() {
  if (state_ && state_->saved_cout != nullptr) std::cout.rdbuf(state_->saved_cout);
}

bool DistributedTraining::active() const { return state_->group != nullptr; }
int DistributedTraining::rank() const { return active() ? state_->group->rank() : 0; }
int DistributedTraining::world_size() const { return active() ? state_->group->size() : 1; }

int64_t DistributedTraining::local_count(int64_t n) const {
  return distributed::samples_per_rank(n, world_size());
}

at::Tensor DistributedTraining::shard(const at::Tensor& permutation) const {
  if (world_size() == 1) return permutation;
  return distributed::shard_indices(permutation, rank(), world_size());
}

std::vector<at::Tensor> DistributedTraining::forward(const std::vector<at::Tensor>& inputs) {
  return active() ? state_->dp->forward(inputs) : state_->model->forward(inputs);
}

void DistributedTraining::set_gradient_sync(bool sync) {
  if (active()) state_->dp->set_gradient_sync(sync);
}

void DistributedTraining::average_gradients() {
  if (active()) state_->dp->average_gradients();
}

void DistributedTraining::sync_for_eval() {
  if (!active()) return;
  state_->dp->broadcast_buffers();
}

void DistributedTraining::sum_over_ranks(std::vector<double>& values, const std::string& what) {
  if (!active() || values.empty()) return;
  std::vector<at::Tensor> t{at::tensor(values, at::TensorOptions(at::kDouble))};
  state_->group->all_reduce_sum(t, what);
  for (size_t i = 0; i < values.size(); ++i) values[i] = t[0][static_cast<int64_t>(i)].item<double>();
}

double DistributedTraining::global_mean_loss(double loss_sum, int64_t steps) {
  std::vector<double> v{loss_sum, static_cast<double>(steps)};
  sum_over_ranks(v, "train loss all-reduce");
  return v[0] / std::max(1.0, v[1]);
}

bool DistributedTraining::saves() const { return rank() == 0; }

void DistributedTraining::report(double total_s) const {
  if (!active()) return;
  const dist::DataParallel& dp = *state_->dp;
  const double ar = dp.all_reduce_seconds();
  std::cout << "gradient all-reduce (rank 0): " << std::fixed << std::setprecision(2) << ar
            << " s of " << total_s << " s (" << std::setprecision(1)
            << (total_s > 0 ? 100.0 * ar / total_s : 0.0) << "%) not hidden by the backward; "
            << dp.overlapped_buckets() << " buckets launched during it ("
            << std::setprecision(2) << dp.launch_seconds() << " s in the gradient hooks)"
            << std::defaultfloat << "\n";
}

}  // namespace pt2rt::cli
