// tests/cpp/distributed/test_data_parallel.cpp — pt2rt::distributed on loopback: ranks are
// threads of this process, each with its own Model and Gloo process group (FileStore in a
// fresh temporary directory, or TCPStore on a free 127.0.0.1 port). Catch2 assertions are made
// on the main thread only (they are not thread-safe): rank threads return their results.
#include "catch_compat.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <torch/optim/sgd.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "pt2rt/distributed.h"
#include "pt2rt/model.h"

namespace fs = std::filesystem;
using namespace pt2rt;
using namespace pt2rt::distributed;
using pt2rt::test::Contains;

namespace {

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("PT2RT_DISTRIBUTED_FIXTURES");
  return std::string(dir != nullptr ? dir : PT2RT_DISTRIBUTED_FIXTURES_DIR) + "/" + name;
}

/// A fresh directory for one test's FileStore.
std::string fresh_dir() {
  std::string templ = (fs::temp_directory_path() / "pt2rt-ddp-XXXXXX").string();
  REQUIRE(mkdtemp(templ.data()) != nullptr);
  return templ;
}

/// A TCP port nobody listens on now (bound to port 0 by the kernel, then closed).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

constexpr int kSteps = 5;
constexpr int64_t kGlobalBatch = 8;

/// The global batch of step `s`: float32[8, 16] inputs, int64[8] class targets.
std::pair<at::Tensor, at::Tensor> batch(int s) {
  at::Generator gen = at::detail::createCPUGenerator(1000 + s);
  return {at::randn({kGlobalBatch, 16}, gen), at::randint(10, {kGlobalBatch}, gen)};
}

/// How a data-parallel step with several micro-batches syncs its gradients.
enum class Sync {
  EveryBackward,  ///< gradient sync on for every backward (a later one makes buckets stale)
  NoSync,         ///< set_gradient_sync(false) for all but the step's last backward (no_sync)
};

/// 5 SGD steps (lr 0.1, momentum 0.9) of `model` on rows [begin, end) of each global batch;
/// with `micro` > 1, each step accumulates the gradients of `micro` global batches (loss
/// divided by `micro`). `dp` (when given) broadcasts, all-reduces and averages.
void train(Model& model, DataParallel* dp, int64_t begin, int64_t end, int micro = 1,
           Sync sync = Sync::NoSync) {
  model.train();
  std::vector<at::Tensor> params;
  for (const auto& p : model.parameters()) params.push_back(p);
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.1).momentum(0.9));
  for (int s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    for (int m = 0; m < micro; ++m) {
      auto [x, y] = batch(s * micro + m);
      x = x.slice(0, begin, end);
      y = y.slice(0, begin, end);
      if (dp) dp->set_gradient_sync(sync == Sync::EveryBackward || m + 1 == micro);
      std::vector<at::Tensor> out = dp ? dp->forward({x}) : model.forward({x});
      at::Tensor loss = at::cross_entropy_loss(out[0], y);
      (micro > 1 ? loss / static_cast<double>(micro) : loss).backward();
    }
    if (dp) dp->average_gradients();
    opt.step();
  }
}

std::vector<at::Tensor> snapshot(const Model& model) {
  std::vector<at::Tensor> out;
  for (const auto& p : model.parameters()) out.push_back(p.detach().clone());
  return out;
}

/// Runs `body(rank)` on `world` threads; returns each rank's result or rethrows its error on
/// the main thread.
template <typename T>
std::vector<T> run_ranks(int world, const std::function<T(int)>& body) {
  std::vector<std::future<T>> futures;
  for (int r = 0; r < world; ++r) futures.push_back(std::async(std::launch::async, body, r));
  std::vector<T> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

double max_rel_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-12, b.abs().max().item<double>());
}

}  // namespace

/// Trains 2 ranks (threads) of mlp_b4.pt2 on rows [4r, 4r + 4) of each global batch with
/// `train(..., micro, sync)`; returns each rank's parameters and its overlapped_buckets().
std::vector<std::pair<std::vector<at::Tensor>, int64_t>> train_two_ranks(
    const Rendezvous& where, bool overlap, int micro = 1, Sync sync = Sync::NoSync) {
  return run_ranks<std::pair<std::vector<at::Tensor>, int64_t>>(2, [&](int rank) {
    Model model = Model::load(fixture("mlp_b4.pt2"));
    if (rank == 1) {  // DataParallel's initial broadcast must undo this
      at::NoGradGuard g;
      for (auto& p : model.parameters()) p.add_(1.0);
    }
    Rendezvous me = where;
    me.rank = rank;
    GroupOptions options;
    options.timeout = std::chrono::seconds(30);
    ProcessGroup group = ProcessGroup::join(me, options);
    DataParallelOptions dpo;
    dpo.bucket_bytes = 2048;  // several buckets for this small MLP
    dpo.overlap = overlap;
    DataParallel dp(model, group, dpo);
    train(model, &dp, rank * kGlobalBatch / 2, (rank + 1) * kGlobalBatch / 2, micro, sync);
    return std::make_pair(snapshot(model), dp.overlapped_buckets());
  });
}

TEST_CASE("2 ranks x batch 4 reach the parameters of 1 rank x batch 8 (MLP, 5 SGD steps)",
          "[distributed]") {
  Model single = Model::load(fixture("mlp_b8.pt2"));
  train(single, nullptr, 0, kGlobalBatch);
  const std::vector<at::Tensor> expected = snapshot(single);

  Rendezvous where;
  where.world_size = 2;
  std::string store;
  bool overlap = true;
  SECTION("TCPStore, all-reduce overlapped with the backward") {
    store = "TCPStore";
    where.master_addr = "127.0.0.1";
    where.master_port = free_port();
  }
  SECTION("FileStore, all-reduce overlapped with the backward") {
    store = "FileStore";
    where.file_path = fresh_dir() + "/store";
  }
  SECTION("FileStore, all-reduce after the backward") {
    store = "FileStore";
    overlap = false;
    where.file_path = fresh_dir() + "/store";
  }
  auto results = train_two_ranks(where, overlap);
  INFO(store << (overlap ? ", overlap" : ", no overlap"));
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(results[rank].first.size() == expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("rank " << rank << " parameter " << i);
      CHECK(max_rel_diff(results[rank].first[i], expected[i]) <= 1e-5);
    }
    // every step's buckets were launched by the gradient hooks during the backward
    if (overlap) CHECK(results[rank].second > 0);
    else CHECK(results[rank].second == 0);
  }
}

TEST_CASE("gradient accumulation: 2 ranks x 2 micro-batches of 4 equal 1 rank x 2 of 8",
          "[distributed]") {
  Model single = Model::load(fixture("mlp_b8.pt2"));
  train(single, nullptr, 0, kGlobalBatch, 2);
  const std::vector<at::Tensor> expected = snapshot(single);

  Rendezvous where;
  where.world_size = 2;
  where.file_path = fresh_dir() + "/store";
  Sync sync = Sync::NoSync;
  SECTION("set_gradient_sync(false) before all but the last backward (DDP's no_sync)") {}
  SECTION("sync on for every backward: the first one's buckets are stale, relaunched") {
    sync = Sync::EveryBackward;
  }
  auto results = train_two_ranks(where, true, 2, sync);
  for (int rank = 0; rank < 2; ++rank) {
    for (size_t i = 0; i < expected.size(); ++i) {
      INFO("rank " << rank << " parameter " << i);
      CHECK(max_rel_diff(results[rank].first[i], expected[i]) <= 1e-5);
    }
    CHECK(results[rank].second > 0);
  }
}

TEST_CASE("buffers follow rank 0: at construction and before every training forward",
          "[distributed]") {
  Rendezvous where;
  where.world_size = 2;
  where.file_path = fresh_dir() + "/store";
  auto results = run_ranks<std::vector<double>>(2, [&](int rank) {
    Model model = Model::load(fixture("cnn_bn_b4.pt2"));
    Rendezvous me = where;
    me.rank = rank;
    ProcessGroup group = ProcessGroup::join(me);
    auto perturb = [&] {
      at::NoGradGuard g;
      for (auto& [name, b] : model.named_buffers()) {
        if (b.is_floating_point()) b.add_(1.0 + rank);
      }
    };
    if (rank == 1) perturb();  // undone by the initial broadcast
    DataParallel dp(model, group);
    std::vector<double> sums;
    auto record = [&] {
      double sum = 0;
      for (auto& [name, b] : model.named_buffers()) sum += b.to(at::kDouble).sum().item<double>();
      sums.push_back(sum);
    };
    record();
    model.train();
    at::Generator gen = at::detail::createCPUGenerator(7);  // the same batch on both ranks
    const at::Tensor x = at::randn({4, 1, 16, 16}, gen);
    perturb();  // both ranks, differently: the forward's broadcast makes them rank 0's again
    dp.forward({x});
    record();
    return sums;
  });
  CHECK(results[0][0] == results[1][0]);
  CHECK(results[0][1] == results[1][1]);
  CHECK(results[0][0] != results[0][1]);
}

TEST_CASE("DataParallel buckets cover every trainable parameter once, in reverse order",
          "[distributed]") {
  Model model = Model::load(fixture("mlp_b4.pt2"));
  Rendezvous one;
  one.file_path = fresh_dir() + "/store";
  ProcessGroup group = ProcessGroup::join(one);
  DataParallelOptions dpo;
  dpo.bucket_bytes = 2048;
  DataParallel dp(model, group, dpo);
  std::vector<size_t> order;
  for (const auto& b : dp.buckets()) order.insert(order.end(), b.begin(), b.end());
  const size_t n = model.parameters().size();
  REQUIRE(order.size() == n);
  for (size_t k = 0; k < n; ++k) CHECK(order[k] == n - 1 - k);
  CHECK(dp.buckets().size() > 1);
}

TEST_CASE("a peer that leaves fails the survivors' all-reduce with DistributedError naming it",
          "[distributed]") {
  int world = 2;
  SECTION("2 ranks") {}
  SECTION("3 ranks: the lost one is told by its stopped heartbeat") { world = 3; }
  const int leaver = world - 1;
  Rendezvous where;
  where.world_size = world;
  where.master_addr = "127.0.0.1";
  where.master_port = free_port();
  const auto start = std::chrono::steady_clock::now();
  auto messages = run_ranks<std::string>(world, [&](int rank) -> std::string {
    Rendezvous me = where;
    me.rank = rank;
    GroupOptions options;
    options.timeout = std::chrono::seconds(5);
    ProcessGroup group = ProcessGroup::join(me, options);
    std::vector<at::Tensor> t{at::ones({4})};
    group.all_reduce_sum(t, "first all-reduce");
    if (rank == leaver) return "left";  // its process group is destroyed: connections close
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    try {
      group.all_reduce_sum(t, "gradient all-reduce");
    } catch (const DistributedError& e) {
      return std::string(e.kind() == DistributedError::Kind::Collective ? "collective: "
                                                                         : "other: ") +
             e.what();
    }
    return "no error";
  });
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(messages[leaver] == "left");
  for (int rank = 0; rank < leaver; ++rank) {
    CHECK_THAT(messages[rank],
               Contains("collective: pt2rt::DistributedError: rank " + std::to_string(rank) +
                        ": gradient all-reduce failed: lost rank " + std::to_string(leaver) +
                        " ("));
  }
  CHECK(secs < 20);
}

TEST_CASE("rendezvous failures are DistributedError naming the store", "[distributed]") {
  GroupOptions options;
  options.timeout = std::chrono::seconds(2);
  SECTION("port in use") {
    const int port = free_port();
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(listen(fd, 1) == 0);
    Rendezvous where{0, 2, "127.0.0.1", port, ""};
    try {
      ProcessGroup::join(where, options);
      FAIL("joined on a port in use");
    } catch (const DistributedError& e) {
      CHECK(e.kind() == DistributedError::Kind::Rendezvous);
      CHECK_THAT(std::string(e.what()),
                 Contains("rank 0 of 2: cannot serve TCPStore 127.0.0.1:" + std::to_string(port)));
    }
    close(fd);
  }
  SECTION("unreachable master") {
    const int port = free_port();
    Rendezvous where{1, 2, "127.0.0.1", port, ""};
    const auto start = std::chrono::steady_clock::now();
    try {
      ProcessGroup::join(where, options);
      FAIL("joined without a master");
    } catch (const DistributedError& e) {
      CHECK(e.kind() == DistributedError::Kind::Rendezvous);
      CHECK_THAT(std::string(e.what()),
                 Contains("rank 1 of 2: cannot reach TCPStore 127.0.0.1:" + std::to_string(port)));
    }
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30));
  }
  SECTION("bad rank") {
    Rendezvous where{2, 2, "127.0.0.1", 29500, ""};
    CHECK_THROWS_AS(ProcessGroup::join(where, options), DistributedError);
  }
}

TEST_CASE("Rendezvous::from_env reads torchrun's variables", "[distributed]") {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "3", 1);
  setenv("MASTER_ADDR", "10.0.0.7", 1);
  setenv("MASTER_PORT", "29511", 1);
  CHECK(Rendezvous::env_present());
  Rendezvous r = Rendezvous::from_env();
  CHECK(r.rank == 1);
  CHECK(r.world_size == 3);
  CHECK(r.master_addr == "10.0.0.7");
  CHECK(r.master_port == 29511);
  setenv("MASTER_PORT", "70000", 1);
  CHECK_THROWS_WITH(Rendezvous::from_env(), Contains("MASTER_PORT='70000'"));
  unsetenv("MASTER_PORT");
  CHECK_THROWS_WITH(Rendezvous::from_env(), Contains("MASTER_PORT is not set"));
  for (const char* v : {"RANK", "WORLD_SIZE", "MASTER_ADDR"}) unsetenv(v);
  CHECK_FALSE(Rendezvous::env_present());
}

namespace {
void app_sigpipe_handler(int) {}
}  // namespace

TEST_CASE("joining a group ignores SIGPIPE unless the application chose a disposition",
          "[distributed]") {
  // A write to a dead peer's socket must be an error naming the lost rank, not the death of
  // this process (the default action of SIGPIPE, which Gloo's writev cannot suppress).
  struct sigaction saved {};
  REQUIRE(::sigaction(SIGPIPE, nullptr, &saved) == 0);
  auto set_handler = [](void (*h)(int)) {
    struct sigaction sa {};
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    REQUIRE(::sigaction(SIGPIPE, &sa, nullptr) == 0);
  };
  auto current = [] {
    struct sigaction now {};
    ::sigaction(SIGPIPE, nullptr, &now);
    return now.sa_handler;
  };
  Rendezvous one;
  SECTION("default disposition: ignored after join") {
    set_handler(SIG_DFL);
    one.file_path = fresh_dir() + "/store";
    ProcessGroup group = ProcessGroup::join(one);
    CHECK(current() == SIG_IGN);
  }
  SECTION("the application's handler is kept") {
    set_handler(app_sigpipe_handler);
    one.file_path = fresh_dir() + "/store";
    ProcessGroup group = ProcessGroup::join(one);
    CHECK(current() == app_sigpipe_handler);
  }
  ::sigaction(SIGPIPE, &saved, nullptr);
}

TEST_CASE("ProcessGroup: the NCCL backend needs a GPU and a build with NCCL", "[distributed]") {
  Rendezvous one;
  one.file_path = fresh_dir() + "/store";
  GroupOptions options;
  options.backend = Backend::Nccl;  // options.device stays the CPU
  if (!nccl_available()) {
    CHECK_THROWS_WITH(ProcessGroup::join(one, options), Contains("built without NCCL"));
  } else {
    CHECK_THROWS_WITH(ProcessGroup::join(one, options), Contains("needs this rank's GPU"));
  }
  CHECK(std::string(backend_name(Backend::Nccl)) == "NCCL");
  CHECK(std::string(backend_name(Backend::Gloo)) == "Gloo");
}

TEST_CASE("auto_backend: NCCL only on CUDA, with NCCL built in, one GPU per local rank",
          "[distributed]") {
  const Backend nccl = nccl_available() ? Backend::Nccl : Backend::Gloo;
  CHECK(auto_backend(/*on_cuda=*/false, 1, 1) == Backend::Gloo);
  CHECK(auto_backend(true, 1, 1) == nccl);
  CHECK(auto_backend(true, 8, 8) == nccl);
  CHECK(auto_backend(true, 2, 1) == Backend::Gloo);  // two ranks would share a GPU
  CHECK(auto_backend(true, 0, 1) == Backend::Gloo);  // world size unknown
  CHECK(auto_backend(true, 1, 0) == Backend::Gloo);  // no visible GPU
}

TEST_CASE("ProcessGroup over NCCL (one rank): collectives on CUDA and staged CPU tensors",
          "[distributed][cuda]") {
  if (!at::hasCUDA() || !nccl_available()) {
    WARN("no CUDA device or no NCCL in this build: ProcessGroupNCCL not exercised here");
    return;
  }
  Rendezvous one;
  one.file_path = fresh_dir() + "/store";
  GroupOptions options;
  options.backend = Backend::Nccl;
  options.device = c10::Device(c10::kCUDA, 0);
  ProcessGroup group = ProcessGroup::join(one, options);
  CHECK(group.backend() == Backend::Nccl);
  const at::Tensor x = at::arange(6, at::TensorOptions(at::kFloat)).to(options.device);
  std::vector<at::Tensor> ts{x.clone(), at::tensor({1.5, 2.5}, at::kDouble)};  // CUDA, CPU
  group.all_reduce_sum(ts, "test all-reduce");  // one rank: the sum is the tensor itself
  CHECK(ts[0].is_cuda());
  CHECK(at::equal(ts[0], x));
  CHECK(ts[1].is_cpu());
  CHECK(at::equal(ts[1], at::tensor({1.5, 2.5}, at::kDouble)));
  at::Tensor started = x.clone();
  group.start_all_reduce_sum(started, "test started all-reduce");
  group.wait_started("test started all-reduce");
  CHECK(at::equal(started, x));
  at::Tensor on_cpu = at::ones({2});
  CHECK_THROWS_WITH(group.start_all_reduce_sum(on_cpu, "test"), Contains("CUDA tensors"));
  std::vector<at::Tensor> bs{x.clone(), at::ones({3})};
  group.broadcast(bs, 0, "test broadcast");
  CHECK(at::equal(bs[0], x));
  CHECK(at::equal(bs[1], at::ones({3})));
  group.barrier("test barrier");

  Model on_cpu_model = Model::load(fixture("mlp_b4.pt2"));
  CHECK_THROWS_WITH(DataParallel(on_cpu_model, group), Contains("NCCL reduces this rank's GPU"));
  Model model = Model::load(fixture("mlp_b4.pt2"), options.device);
  DataParallel dp(model, group);
  model.train();
  const at::Tensor in = at::randn({4, 16}).to(options.device);
  dp.forward({in}).at(0).pow(2).mean().backward();
  dp.average_gradients();
  for (const at::Tensor& p : model.parameters()) CHECK(p.grad().defined());
}
