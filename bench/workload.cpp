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

}  // namespace pt2rt::bench
