// finetune_ddp — data-parallel fine-tuning with pt2rt::distributed (pt2rt/distributed.h): the
// digits job of finetune.cpp split over processes (one machine or several) with c10d Gloo.
// Start one process per rank with torchrun's variables (torchrun itself can launch it):
//
//   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 finetune_ddp m.pt2 train.pt test.pt tuned.pt2 &
//   RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 finetune_ddp m.pt2 train.pt test.pt tuned.pt2
//
// Every sample is trained every epoch, split as torch.utils.data.DistributedSampler(shuffle,
// drop_last=False) splits it (https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler):
// the epoch's shuffle (one generator seeded once, the same on every rank, as export-cli train)
// is padded by wrapping around to ceil(N / world) samples per rank, and rank r takes
// positions r, r + world, ... So every rank runs the same number of batches of the same sizes
// (the last one partial: the archive has a dynamic batch), and the mean of the ranks' mean
// gradients that DataParallel computes is the mean over the global batch, as with PyTorch's
// DistributedDataParallel. Every rank then holds the same parameters; rank 0 evaluates on
// the whole test split and saves.
#include <pt2rt/distributed.h>
#include <pt2rt/distributed_sampler.h>  // shard_indices: DistributedSampler's split
#include <pt2rt/model.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

#include <algorithm>
#include <fstream>
#include <iostream>

constexpr int64_t kBatch = 32;  // per rank (any size in the archive's batch range)

int main(int argc, char** argv) try {
  if (argc < 5) {
    std::cerr << "usage: RANK=r WORLD_SIZE=w MASTER_ADDR=host MASTER_PORT=port finetune_ddp "
                 "<model.pt2> <train.pt> <test.pt> <tuned.pt2> [epochs]\n";
    return 2;
  }
  auto read = [](const char* path) {  // (inputs, targets) written by Python's torch.save
    std::ifstream file(path, std::ios::binary);
    auto tuple = torch::pickle_load({std::istreambuf_iterator<char>(file), {}}).toTuple();
    return std::make_pair(tuple->elements()[0].toTensor(), tuple->elements()[1].toTensor());
  };
  const auto [x, y] = read(argv[2]);
  pt2rt::Model model = pt2rt::Model::load(argv[1]);

  pt2rt::distributed::GroupOptions options;
  options.timeout = std::chrono::seconds(60);  // a dead or hung peer fails us after this
  auto group = pt2rt::distributed::ProcessGroup::join(
      pt2rt::distributed::Rendezvous::from_env(), options);
  pt2rt::distributed::DataParallel ddp(model, group);  // parameters and buffers from rank 0
  const int rank = group.rank(), world = group.size();

  at::Generator shuffle = at::detail::createCPUGenerator(0);  // the same seed on every rank
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(1e-3));
  for (int epoch = 1; epoch <= (argc > 5 ? std::stoi(argv[5]) : 5); ++epoch) {
    model.train();
    const auto mine =
        pt2rt::distributed::shard_indices(torch::randperm(x.size(0), shuffle), rank, world);
    const int64_t count = mine.size(0);  // ceil(N / world), on every rank
    for (int64_t i = 0; i < count; i += kBatch) {  // the last batch may be partial
      auto idx = mine.slice(0, i, std::min(i + kBatch, count));
      auto loss = torch::cross_entropy_loss(ddp.forward({x.index_select(0, idx)})[0],
                                            y.index_select(0, idx));
      optimizer.zero_grad();
      loss.backward();
      ddp.average_gradients();  // mean over the ranks, before the step
      optimizer.step();
    }
  }
  if (rank == 0) {
    // Evaluates rank 0's model (its BatchNorm statistics; collectives are not allowed here:
    // the other ranks have finished).
    const auto [xt, yt] = read(argv[3]);
    model.eval();
    c10::InferenceMode guard;
    int64_t correct = 0;
    for (int64_t i = 0; i < xt.size(0); i += kBatch) {  // every sample, the last batch partial
      const int64_t end = std::min(i + kBatch, xt.size(0));
      correct += model.forward({xt.slice(0, i, end)})[0].argmax(1).eq(yt.slice(0, i, end))
                     .sum().item<int64_t>();
    }
    std::cout << "ranks " << world << "  test accuracy " << double(correct) / double(xt.size(0))
              << " (" << xt.size(0) << " samples)  all-reduce " << ddp.all_reduce_seconds()
              << " s\n";
    model.save(argv[4]);  // atomic: temp file, fsync, rename
    std::cout << "saved " << argv[4] << "\n";
  }
} catch (const std::exception& e) {
  std::cerr << "finetune_ddp: " << e.what() << "\n";
  return 1;
}
