// finetune — the pt2rt C++ API on one page: load a model.pt2 exported in Python, fine-tune it
// with torch::optim::Adam on all ten digits, evaluate, save. No Python at run time.
// Usage: finetune <model.pt2> <train.pt> <test.pt> <tuned.pt2> [epochs]
#include <pt2rt/model.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

#include <fstream>
#include <iostream>

constexpr int64_t kBatch = 32;  // the archive's static batch size (model.py BATCH_SIZE)

// (inputs, targets) as written by Python's torch.save((inputs, targets), path).
std::pair<torch::Tensor, torch::Tensor> load_data(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), {});
  auto pair = torch::pickle_load(bytes).toTuple();
  return {pair->elements()[0].toTensor(), pair->elements()[1].toTensor()};
}

double accuracy(pt2rt::Model& model, const torch::Tensor& x, const torch::Tensor& y) {
  model.eval();  // eval mode runs the inference graph
  c10::InferenceMode guard;
  int64_t correct = 0;
  for (int64_t i = 0; i < x.size(0); i += kBatch) {
    auto xb = x.slice(0, i, i + kBatch);
    const int64_t n = xb.size(0);
    if (n < kBatch) xb = torch::cat({xb, torch::zeros({kBatch - n, 1, 8, 8})});  // pad
    auto pred = model.forward({xb})[0].argmax(1).slice(0, 0, n);
    correct += pred.eq(y.slice(0, i, i + n)).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(x.size(0));
}

int main(int argc, char** argv) try {
  if (argc < 5) {
    std::cerr << "usage: finetune <model.pt2> <train.pt> <test.pt> <tuned.pt2> [epochs]\n";
    return 2;
  }
  pt2rt::Model model = pt2rt::Model::load(argv[1], torch::kCPU);
  auto [x, y] = load_data(argv[2]);
  auto [x_test, y_test] = load_data(argv[3]);
  std::cout << "before: test accuracy " << accuracy(model, x_test, y_test) << "\n";

  torch::manual_seed(0);
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(1e-3));
  for (int epoch = 1; epoch <= (argc > 5 ? std::stoi(argv[5]) : 5); ++epoch) {
    model.train();  // training mode: forward graph, backward graph through autograd
    auto perm = torch::randperm(x.size(0));
    const int64_t steps = x.size(0) / kBatch;  // full batches; the shuffle varies the rest
    double loss_sum = 0;
    for (int64_t i = 0; i < steps * kBatch; i += kBatch) {
      auto idx = perm.slice(0, i, i + kBatch);
      auto logits = model.forward({x.index_select(0, idx)})[0];
      auto loss = torch::cross_entropy_loss(logits, y.index_select(0, idx));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
    }
    std::cout << "epoch " << epoch << "  loss " << loss_sum / steps << "  test accuracy "
              << accuracy(model, x_test, y_test) << "\n";
  }
  model.save(argv[4]);  // atomic: temp file, fsync, rename
  std::cout << "saved " << argv[4] << "\n";
} catch (const std::exception& e) {
  std::cerr << "finetune: " << e.what() << "\n";
  return 1;
}
