// runtime/kernels/linear_prepack.cpp — see linear_prepack.h.
#include "kernels/linear_prepack.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <optional>

namespace pt2rt {
namespace {

void prepack_linear_weight_kernel(torch::jit::Stack& s) {
  const at::Tensor weight_t = s[0].toTensor();
  s.clear();
  s.emplace_back(cpu_float32(weight_t, 2) ? weight_t.t().contiguous().to_mkldnn() : weight_t);
}

void linear_prepacked_kernel(torch::jit::Stack& s) {
  const c10::optional<at::Tensor> bias = s[2].toOptional<at::Tensor>();
  const at::Tensor weight = s[1].toTensor(), input = s[0].toTensor();
  s.clear();
  if (weight.is_mkldnn() && cpu_float32(input, 2) && (!bias || cpu_float32(*bias, 1))) {
    s.emplace_back(at::mkldnn_linear(input.contiguous().to_mkldnn(), weight, bias).to_dense());
    return;
  }
  const at::Tensor weight_t = weight.is_mkldnn() ? weight.to_dense().t() : weight;
  s.emplace_back(bias ? at::addmm(*bias, input, weight_t) : at::mm(input, weight_t));
}

}  // namespace

const NativeOp& prepack_linear_weight_op() {
  static const NativeOp op{
      torch::jit::parseSchema("pt2rt::prepack_linear_weight(Tensor weight_t) -> Tensor"),
      &prepack_linear_weight_kernel};
  return op;
}

const NativeOp& linear_prepacked_op() {
  static const NativeOp op{
      torch::jit::parseSchema("pt2rt::linear_prepacked(Tensor input, Tensor packed_weight, "
                              "Tensor? bias) -> Tensor"),
      &linear_prepacked_kernel};
  return op;
}

}  // namespace pt2rt
