// pt2rt::ctc_loss and its backward (runtime/kernels/ctc_ops.h): bit for bit against ATen's
// _ctc_loss and _ctc_loss_backward (padded and concatenated targets, zero_infinity, an
// infinite loss), on the CPU and on CUDA where there is one; shapes only on meta; bad
// arguments refused by name.
#include <ATen/ATen.h>

#include <vector>

#include "catch_compat.h"
#include "kernels/ctc_ops.h"
#include "native_op_call.h"

namespace pt2rt {
using test::check_refused;
using test::run;

namespace {

constexpr int64_t kT = 10, kN = 3, kC = 5, kS = 4;

struct Case {
  at::Tensor log_probs, targets, input_lengths, target_lengths;
};

Case make_case(at::Device device, bool concatenated) {
  at::manual_seed(0);
  Case c;
  c.log_probs = at::randn({kT, kN, kC}, at::dtype(at::kDouble)).log_softmax(-1).to(device);
  at::Tensor padded = at::randint(1, kC, {kN, kS}, at::kLong);
  padded.index_put_({0, 0}, 2);
  padded.index_put_({0, 1}, 2);  // a repeat: needs a blank between
  const std::vector<int64_t> lengths{4, 1, 3};
  c.target_lengths = at::tensor(lengths, at::kLong);
  c.input_lengths = at::tensor(std::vector<int64_t>{4, kT, 7}, at::kLong);  // sample 0: inf
  if (concatenated) {
    std::vector<at::Tensor> rows;
    for (int64_t i = 0; i < kN; ++i) rows.push_back(padded[i].slice(0, 0, lengths[i]));
    padded = at::cat(rows);
  }
  c.targets = padded.to(device);
  return c;
}

void check_against_aten(at::Device device) {
  for (bool concatenated : {false, true}) {
    for (bool zero_infinity : {false, true}) {
      INFO("concatenated " << concatenated << ", zero_infinity " << zero_infinity);
      const Case c = make_case(device, concatenated);
      const std::vector<int64_t> il{4, kT, 7}, tl{4, 1, 3};
      auto [nll, log_alpha] =
          at::_ctc_loss(c.log_probs, c.targets, il, tl, /*blank=*/0, zero_infinity);
      const at::Tensor got = run("pt2rt::ctc_loss", {c.log_probs, c.targets, c.input_lengths,
                                                     c.target_lengths, int64_t{0}, zero_infinity})
                                 .at(0)
                                 .toTensor();
      CHECK(at::equal(got, nll));
      CHECK(std::isinf(got[0].item<double>()));  // _ctc_loss keeps it; ctc_loss zeroes it
      const at::Tensor grad = at::rand({kN}, c.log_probs.options());
      const at::Tensor want = at::_ctc_loss_backward(grad, c.log_probs, c.targets, il, tl, nll,
                                                     log_alpha, 0, zero_infinity);
      const at::Tensor dx =
          run("pt2rt::ctc_loss_backward", {grad, c.log_probs, c.targets, c.input_lengths,
                                           c.target_lengths, int64_t{0}, zero_infinity})
              .at(0)
              .toTensor();
      CHECK(dx.sizes() == c.log_probs.sizes());
      CHECK(at::allclose(dx, want, 0, 0, /*equal_nan=*/true));
    }
  }
}

}  // namespace

TEST_CASE("pt2rt::ctc_loss and its backward are ATen's _ctc_loss and _ctc_loss_backward", "[ctc]") {
  check_against_aten(at::kCPU);
  if (at::hasCUDA()) check_against_aten(at::Device(at::kCUDA, 0));
}

TEST_CASE("pt2rt::ctc_loss on meta tensors computes only the result shapes", "[ctc]") {
  const auto meta = at::device(at::kMeta);
  const at::Tensor lp = at::empty({kT, kN, kC}, meta),
                   targets = at::empty({kN, kS}, meta.dtype(at::kLong));
  const at::Tensor lengths = at::empty({kN}, meta.dtype(at::kLong));
  const at::Tensor nll =
      run("pt2rt::ctc_loss", {lp, targets, lengths, lengths, int64_t{0}, false}).at(0).toTensor();
  CHECK(nll.is_meta());
  CHECK(nll.sizes() == at::IntArrayRef{kN});
  const at::Tensor dx = run("pt2rt::ctc_loss_backward", {at::empty({kN}, meta), lp, targets,
                                                         lengths, lengths, int64_t{0}, false})
                            .at(0)
                            .toTensor();
  CHECK(dx.sizes() == lp.sizes());
}

TEST_CASE("pt2rt::ctc_loss refuses bad arguments by name", "[ctc]") {
  const Case c = make_case(at::kCPU, false);
  const c10::IValue blank = int64_t{0};
  check_refused("pt2rt::ctc_loss",
                {c.log_probs[0], c.targets, c.input_lengths, c.target_lengths, blank, false},
                "log_probs must be a floating [T, N, C] tensor");
  check_refused(
      "pt2rt::ctc_loss",
      {c.log_probs, c.targets.to(at::kFloat), c.input_lengths, c.target_lengths, blank, false},
      "targets must be an integral");
  check_refused(
      "pt2rt::ctc_loss",
      {c.log_probs, c.targets.slice(0, 0, 2), c.input_lengths, c.target_lengths, blank, false},
      "padded targets must have 3 rows");
  check_refused(
      "pt2rt::ctc_loss",
      {c.log_probs, c.targets, c.input_lengths.slice(0, 0, 2), c.target_lengths, blank, false},
      "input_lengths must be a 1-D integral tensor of 3 elements");
  check_refused(
      "pt2rt::ctc_loss",
      {c.log_probs, c.targets, c.input_lengths, c.target_lengths.to(at::kFloat), blank, false},
      "target_lengths must be a 1-D integral tensor");
  // a length past T, a blank outside the classes: ATen's own checks
  check_refused("pt2rt::ctc_loss",
                {c.log_probs, c.targets, at::tensor(std::vector<int64_t>{kT + 1, kT, kT}),
                 c.target_lengths, blank, false},
                "input_lengths");
  check_refused("pt2rt::ctc_loss",
                {c.log_probs, c.targets, c.input_lengths, c.target_lengths, int64_t{kC}, false},
                "blank");
  check_refused("pt2rt::ctc_loss_backward",
                {at::zeros({2}, c.log_probs.options()), c.log_probs, c.targets, c.input_lengths,
                 c.target_lengths, blank, false},
                "grad must be");
}

}  // namespace pt2rt
