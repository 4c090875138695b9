// runtime/kernels/ctc_ops.cpp — see ctc_ops.h.
#include "kernels/ctc_ops.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/_ctc_loss.h>
#include <ATen/ops/_ctc_loss_backward.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/Exception.h>

#include <string>
#include <tuple>
#include <vector>

namespace pt2rt {

const char* const kCtcLossSchema =
    "pt2rt::ctc_loss(Tensor log_probs, Tensor targets, Tensor input_lengths, "
    "Tensor target_lengths, int blank, bool zero_infinity) -> Tensor";
const char* const kCtcLossBackwardSchema =
    "pt2rt::ctc_loss_backward(Tensor grad, Tensor log_probs, Tensor targets, "
    "Tensor input_lengths, Tensor target_lengths, int blank, bool zero_infinity) -> Tensor";

namespace {

using torch::jit::Stack;

struct CtcArgs {
  at::Tensor log_probs, targets, input_lengths, target_lengths;
  int64_t blank = 0;
  bool zero_infinity = false;
};

void check_lengths(const at::Tensor& t, const char* name, int64_t n) {
  TORCH_CHECK(t.defined() && t.dim() == 1 && t.size(0) == n &&
                  c10::isIntegralType(t.scalar_type(), /*includeBool=*/false),
              "pt2rt::ctc_loss: ", name, " must be a 1-D integral tensor of ", n,
              " elements (the batch), got ", t.defined() ? t.toString() : "undefined", " ",
              t.defined() ? t.sizes() : at::IntArrayRef{});
}

/// Pops the six arguments the two schemas end with and checks what does not need values.
CtcArgs pop_args(Stack& s) {
  CtcArgs a;
  a.zero_infinity = torch::jit::pop(s).toBool();
  a.blank = torch::jit::pop(s).toInt();
  a.target_lengths = torch::jit::pop(s).toTensor();
  a.input_lengths = torch::jit::pop(s).toTensor();
  a.targets = torch::jit::pop(s).toTensor();
  a.log_probs = torch::jit::pop(s).toTensor();
  TORCH_CHECK(a.log_probs.dim() == 3 && at::isFloatingType(a.log_probs.scalar_type()),
              "pt2rt::ctc_loss: log_probs must be a floating [T, N, C] tensor, got ",
              a.log_probs.toString(), " ", a.log_probs.sizes());
  TORCH_CHECK((a.targets.dim() == 1 || a.targets.dim() == 2) &&
                  c10::isIntegralType(a.targets.scalar_type(), /*includeBool=*/false),
              "pt2rt::ctc_loss: targets must be an integral [N, S] or [sum(target_lengths)] "
              "tensor, got ",
              a.targets.toString(), " ", a.targets.sizes());
  const int64_t n = a.log_probs.size(1);
  TORCH_CHECK(a.targets.dim() == 1 || a.targets.size(0) == n,
              "pt2rt::ctc_loss: padded targets must have ", n, " rows (the batch), got ",
              a.targets.size(0));
  check_lengths(a.input_lengths, "input_lengths", n);
  check_lengths(a.target_lengths, "target_lengths", n);
  return a;
}

std::vector<int64_t> host_values(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

/// ATen's _ctc_loss on `a`, as eager's ctc_loss calls it: the lengths read on the host, the
/// targets int64 on log_probs' device. Keeps those arguments for _ctc_loss_backward.
struct AtenCtc {
  std::vector<int64_t> input_lengths, target_lengths;
  at::Tensor targets, nll, log_alpha;

  explicit AtenCtc(const CtcArgs& a)
      : input_lengths(host_values(a.input_lengths)),
        target_lengths(host_values(a.target_lengths)),
        targets(a.targets.to(a.log_probs.device(), at::kLong)) {
    std::tie(nll, log_alpha) = at::_ctc_loss(a.log_probs, targets, input_lengths, target_lengths,
                                             a.blank, a.zero_infinity);
  }
};

}  // namespace

void ctc_loss_kernel(Stack& s) {
  const CtcArgs a = pop_args(s);
  if (a.log_probs.is_meta()) {
    s.emplace_back(at::empty({a.log_probs.size(1)}, a.log_probs.options()));
    return;
  }
  s.emplace_back(AtenCtc(a).nll);
}

void ctc_loss_backward_kernel(Stack& s) {
  const CtcArgs a = pop_args(s);
  const at::Tensor grad = torch::jit::pop(s).toTensor();
  TORCH_CHECK(
      grad.dim() == 1 && grad.size(0) == a.log_probs.size(1) &&
          grad.scalar_type() == a.log_probs.scalar_type() && grad.device() == a.log_probs.device(),
      "pt2rt::ctc_loss_backward: grad must be ", a.log_probs.toString(), " [", a.log_probs.size(1),
      "] on log_probs' device, got ", grad.toString(), " ", grad.sizes());
  if (a.log_probs.is_meta()) {
    s.emplace_back(at::empty_like(a.log_probs));
    return;
  }
  const AtenCtc f(a);  // recomputed: log_alpha is never a saved activation
  s.emplace_back(at::_ctc_loss_backward(grad, a.log_probs, f.targets, f.input_lengths,
                                        f.target_lengths, f.nll, f.log_alpha, a.blank,
                                        a.zero_infinity));
}

}  // namespace pt2rt
