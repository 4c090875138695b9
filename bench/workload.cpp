// bench/workload.cpp — see workload.h.
#include "workload.h"

#include <ATen/ATen.h>

namespace pt2rt::bench {

at::Tensor loss_of(const at::Tensor& out, const Workload& w) {
  return w.loss == "ce" ? at::cross_entropy_loss(out, w.target) : out.pow(2).mean();
}

void zero_grads(const std::vector<at::Tensor>& params, bool set_to_none) {
  for (const at::Tensor& p : params) {
    at::Tensor& g = const_cast<at::Tensor&>(p).mutable_grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      g = at::Tensor();
    } else {
      g = g.detach();
      g.zero_();
    }
  }
}

std::vector<at::Tensor> trainable(const std::vector<std::pair<std::string, at::Tensor>>& named,
                                  const Workload& w) {
  std::vector<at::Tensor> out;
  for (const auto& [fqn, p] : named) {
    if (fqn.rfind(w.trainable_prefix, 0) == 0) {
      out.push_back(p);
    } else {
      const_cast<at::Tensor&>(p).requires_grad_(false);
    }
  }
  return out;
}

}  // namespace pt2rt::bench
