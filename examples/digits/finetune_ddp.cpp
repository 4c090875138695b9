// finetune_ddp — data-parallel fine-tuning with pt2rt::distributed (pt2rt/distributed.h): the
// digits job of finetune.cpp split over processes (one machine or several) with c10d Gloo.
// Start one process per rank with torchrun's variables (torchrun itself can launch it):
//
//   RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 finetune_ddp m.pt2 train.pt test.pt tuned.pt2 &
//   RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 finetune_ddp m.pt2 train.pt test.pt tuned.pt2
//
// Each rank trains on its own slice of every epoch's shuffle (the same seed everywhere);
// DataParallel averages the gradients, so every rank holds the same parameters; rank 0
// evaluates and saves.
#include <pt2rt/distributed.h>
#include <pt2rt/model.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

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

  torch::manual_seed(0);  // the same shuffle on every rank
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(1e-3));
  const int64_t per_rank = x.size(0) / world;
  for (int epoch = 1; epoch <= (argc > 5 ? std::stoi(argv[5]) : 5); ++epoch) {
    model.train();
    auto mine = torch::randperm(x.size(0)).slice(0, rank * per_rank, (rank + 1) * per_rank);
    for (int64_t i = 0; i + kBatch <= per_rank; i += kBatch) {
      auto idx = mine.slice(0, i, i + kBatch);
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
    int64_t correct = 0, seen = 0;
    for (int64_t i = 0; i + kBatch <= xt.size(0); i += kBatch, seen += kBatch) {
      correct += model.forward({xt.slice(0, i, i + kBatch)})[0].argmax(1).eq(
          yt.slice(0, i, i + kBatch)).sum().item<int64_t>();
    }
    std::cout << "ranks " << world << "  test accuracy " << double(correct) / double(seen)
              << " (full batches)  all-reduce " << ddp.all_reduce_seconds() << " s\n";
    model.save(argv[4]);  // atomic: temp file, fsync, rename
    std::cout << "saved " << argv[4] << "\n";
  }
} catch (const std::exception& e) {
  std::cerr << "finetune_ddp: " << e.what() << "\n";
  return 1;
}
