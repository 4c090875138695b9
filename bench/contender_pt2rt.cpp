// bench/contender_pt2rt.cpp — pt2rt through its public C++ API (pt2rt/model.h), as an
// application would use it.
#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include <memory>

#include "pt2rt/model.h"
#include "workload.h"

namespace pt2rt::bench {

Call pt2rt_inference(const std::string& path, const Workload& w, bool inference_only,
                     bool onednn_benchmark) {
  LoadOptions options;
  options.inference_only = inference_only;
  options.onednn_benchmark = onednn_benchmark;
  auto model = std::make_shared<Model>(Model::load(path, c10::kCPU, options));
  model->eval();
  return [model, inputs = w.inputs] { model->forward(inputs); };
}

Call pt2rt_training(const std::string& path, const Workload& w) {
  struct State {
    Model model;
    std::vector<at::Tensor> params;
    torch::optim::SGD opt;
    Workload w;
  };
  Model m = Model::load(path);
  m.train();
  std::vector<at::Tensor> params = trainable(m.named_parameters(), w);
  auto s = std::make_shared<State>(State{std::move(m), params,
                                         torch::optim::SGD(params, kLearningRate), w});
  return [s] {
    zero_grads(s->params, s->w.set_to_none);
    at::Tensor loss = loss_of(s->model.forward(s->w.inputs)[0], s->w);
    loss.backward();
    s->opt.step();
  };
}

Call pt2rt_load(const std::string& path, bool map_weights, bool inference_only) {
  LoadOptions options;
  options.map_weights = map_weights;
  options.inference_only = inference_only;
  return [path, options] { Model m = Model::load(path, c10::kCPU, options); };
}

}  // namespace pt2rt::bench
