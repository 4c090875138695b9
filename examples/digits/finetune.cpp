// finetune — the pt2rt C++ API on one page: load a model.pt2 exported in Python, fine-tune it
// with torch::optim::Adam on all ten digits, evaluate, save. No Python at run time.
// Usage: finetune <model.pt2> <train.pt> <test.pt> <tuned.pt2> [epochs] [device]
// device: cpu (default) or cuda[:index] — the weights live there, each batch is copied there.
#include <pt2rt/model.h>
#include <torch/optim/adam.h>
#include <torch/serialize.h>

#include <algorithm>
#include <fstream>
#include <iostream>

// Training batch size. The archive has a dynamic batch (pretrain.py exports it with
// pt2rt.Dim("batch", min=1, max=1024)): any size in that range runs, unpadded, within the
// default run bounds (a call over them throws pt2rt::InputError before running).
constexpr int64_t kBatch = 32;

// (inputs, targets) as written by Python's torch.save((inputs, targets), path).
std::pair<torch::Tensor, torch::Tensor> load_data(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), {});
  auto pair = torch::pickle_load(bytes).toTuple();
  return {pair->elements()[0].toTensor(), pair->elements()[1].toTensor()};
}

double accuracy(pt2rt::Model& model, const torch::Tensor& x, const torch::Tensor& y,
                const torch::Device& device) {
  model.eval();  // eval mode runs the inference graph
  c10::InferenceMode guard;
  auto pred = model.forward({x.to(device)})[0].argmax(1);  // the whole split in one call
  return pred.eq(y.to(device)).to(torch::kDouble).mean().item<double>();
}

int main(int argc, char** argv) try {
  if (argc < 5) {
    std::cerr << "usage: finetune <model.pt2> <train.pt> <test.pt> <tuned.pt2> [epochs] [device]\n";
    return 2;
  }
  const torch::Device device(argc > 6 ? argv[6] : "cpu");
  pt2rt::Model model = pt2rt::Model::load(argv[1], device);
  auto [x, y] = load_data(argv[2]);
  auto [x_test, y_test] = load_data(argv[3]);
  std::cout << "before: test accuracy " << accuracy(model, x_test, y_test, device) << "\n";

  torch::manual_seed(0);
  torch::optim::Adam optimizer(model.parameters(), torch::optim::AdamOptions(1e-3));
  for (int epoch = 1; epoch <= (argc > 5 ? std::stoi(argv[5]) : 5); ++epoch) {
    model.train();  // training mode: forward graph, backward graph through autograd
    auto perm = torch::randperm(x.size(0));
    const int64_t steps = (x.size(0) + kBatch - 1) / kBatch;  // the last one may be partial
    double loss_sum = 0;
    for (int64_t i = 0; i < x.size(0); i += kBatch) {
      auto idx = perm.slice(0, i, std::min(i + kBatch, x.size(0)));
      auto logits = model.forward({x.index_select(0, idx).to(device)})[0];
      auto loss = torch::cross_entropy_loss(logits, y.index_select(0, idx).to(device));
      optimizer.zero_grad();
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
    }
    std::cout << "epoch " << epoch << "  loss " << loss_sum / steps << "  test accuracy "
              << accuracy(model, x_test, y_test, device) << "\n";
  }
  model.save(argv[4]);  // atomic: temp file, fsync, rename
  std::cout << "saved " << argv[4] << "\n";
} catch (const std::exception& e) {
  std::cerr << "finetune: " << e.what() << "\n";
  return 1;
}
