// runtime/kernels/conv_prepack.cpp — see conv_prepack.h.
#include "kernels/conv_prepack.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <optional>

namespace pt2rt {
namespace {

void prepack_conv2d_weight_kernel(torch::jit::Stack& s) {
  const int64_t groups = s[4].toInt();
  const std::vector<int64_t> dilation = s[3].toIntVector(), padding = s[2].toIntVector(),
                             stride = s[1].toIntVector();
  const at::Tensor weight = s[0].toTensor();
  s.clear();
  // A channels-last weight makes ATen pick a channels-last primitive: left dense, so that
  // conv2d_prepacked runs at::convolution as the unpacked plan would.
  if (!cpu_float32(weight, 4) || !weight.is_contiguous()) {
    s.emplace_back(weight);
    return;
  }
  s.emplace_back(at::mkldnn_reorder_conv2d_weight(weight.to_mkldnn(), padding, stride, dilation,
                                                  groups));
}

void conv2d_prepacked_kernel(torch::jit::Stack& s) {
  const int64_t num_threads = s[7].toInt(), groups = s[6].toInt();
  const std::vector<int64_t> dilation = s[5].toIntVector(), padding = s[4].toIntVector(),
                             stride = s[3].toIntVector();
  const c10::optional<at::Tensor> bias = s[2].toOptional<at::Tensor>();
  const at::Tensor weight = s[1].toTensor(), input = s[0].toTensor();
  s.clear();
  const bool fits = weight.is_mkldnn() && cpu_float32(input, 4) && input.is_contiguous() &&
                    at::get_num_threads() == num_threads &&
                    (!bias || cpu_float32(*bias, bias->dim()));
  if (fits) {
    s.emplace_back(at::mkldnn_convolution(input, weight, bias, padding, stride, dilation, groups));
    return;
  }
  const at::Tensor dense = weight.is_mkldnn() ? weight.to_dense() : weight;
  s.emplace_back(at::convolution(input, dense, bias, stride, padding, dilation,
                                 /*transposed=*/false, std::vector<int64_t>(padding.size(), 0),
                                 groups));
}

}  // namespace

const NativeOp& prepack_conv2d_weight_op() {
  static const NativeOp op{
      torch::jit::parseSchema("pt2rt::prepack_conv2d_weight(Tensor weight, int[] stride, "
                              "int[] padding, int[] dilation, int groups) -> Tensor"),
      &prepack_conv2d_weight_kernel};
  return op;
}

const NativeOp& conv2d_prepacked_op() {
  static const NativeOp op{
      torch::jit::parseSchema("pt2rt::conv2d_prepacked(Tensor input, Tensor packed_weight, "
                              "Tensor? bias, int[] stride, int[] padding, int[] dilation, "
                              "int groups, int num_threads) -> Tensor"),
      &conv2d_prepacked_kernel};
  return op;
}

}  // namespace pt2rt
