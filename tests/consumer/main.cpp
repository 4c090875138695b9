// consumer — links an installed pt2rt (find_package(pt2rt), pt2rt::runtime) and uses the
// public API: load an archive, run inference on its bundled example, take one SGD step.
// Usage: consumer <model.pt2>; prints "consumer: ok" and exits 0 when everything worked.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <pt2rt/pt2rt.h>  // the umbrella header: every public header compiles in a consumer

#include <cstring>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer <model.pt2>\n";
    return 2;
  }
  try {
    pt2rt::Model model = pt2rt::Model::load(argv[1], at::kCPU);
    const std::vector<pt2rt::Example> examples = model.examples();  // read on demand
    if (examples.empty()) throw std::runtime_error("archive has no bundled example");
    std::vector<at::Tensor> inputs;
    for (const auto& t : examples[0].inputs) {
      at::Tensor x = at::empty(t.sizes, at::TensorOptions().dtype(t.dtype));
      std::memcpy(x.data_ptr(), t.data.data(), t.data.size());
      inputs.push_back(x);
    }
    model.eval();
    at::Tensor y = model.forward(inputs)[0];
    std::cout << "consumer: inference output " << y.sizes() << " sum " << y.sum().item<double>()
              << "\n";
    if (!y.isfinite().all().item<bool>()) throw std::runtime_error("non-finite output");

    model.train();
    at::Tensor loss = model.forward(inputs)[0].pow(2).mean();
    loss.backward();
    size_t with_grad = 0;
    {
      at::NoGradGuard no_grad;
      for (auto& p : model.parameters()) {
        if (!p.grad().defined()) continue;
        ++with_grad;
        p.sub_(p.grad(), 0.01);  // one plain SGD step
      }
    }
    model.eval();
    const double after = model.forward(inputs)[0].pow(2).mean().item<double>();
    std::cout << "consumer: loss " << loss.item<double>() << " -> " << after << " after one SGD "
              << "step, " << with_grad << " parameters had gradients\n";
    if (with_grad == 0) throw std::runtime_error("no parameter received a gradient");
    std::cout << "consumer: ok\n";
    return 0;
  } catch (const pt2rt::Error& e) {
    std::cerr << "consumer: " << e.what() << "\n";
    return 1;
  }
}
