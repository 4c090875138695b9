// runtime/conv_prepack.cpp — see conv_prepack.h.
#include "conv_prepack.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <optional>

#include "libtorch_compat.h"
#include "plan_rewrite.h"

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

bool is_conv(const Instruction& ins) {
  return is_op(ins, "aten::convolution", "") && ins.args.size() == 9 && ins.outputs.size() == 1;
}

/// ATen's own choice at these declared sizes: tensors of those sizes, never filled (only their
/// metadata is read; zero-strided, so nothing of that size is allocated). Sizes ATen refuses
/// (an archive's: e.g. an element count that overflows) are not packed; the load's meta check
/// reports them.
bool aten_picks_onednn_at(const Conv2dCase& c) {
  try {
    const at::Tensor x = at::zeros({1}).expand(c.input);
    const at::Tensor w = at::zeros({1}).expand(c.weight);
    return aten_picks_onednn(x, w, c.stride, c.padding, c.dilation, c.groups);
  } catch (const c10::Error&) {
    return false;
  }
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

size_t prepack_convolutions(std::vector<Instruction>& instructions, const Graph& graph,
                            const std::vector<bool>& weight_only, OneDnnChoice choice,
                            OneDnnBenchmark& benchmark) {
  if (!at::hasMKLDNN() || !at::globalContext().userEnabledMkldnn()) return 0;
  const SlotUse use = slot_use(instructions, graph);
  return replace_packed(instructions, [&](const Instruction& ins) -> std::optional<PackedPair> {
    if (!is_conv(ins)) return std::nullopt;
    const std::vector<PlannedArg>& a = ins.args;
    const auto stride = int_list(a[3], 2), padding = int_list(a[4], 2),
               dilation = int_list(a[5], 2), output_padding = int_list(a[7], 2);
    const bool plain = a[0].kind == PlannedArg::Kind::Slot &&
                       a[1].kind == PlannedArg::Kind::Slot && stride && padding && dilation &&
                       output_padding && *output_padding == std::vector<int64_t>{0, 0} &&
                       a[6].kind == PlannedArg::Kind::Constant && a[6].constant.isBool() &&
                       !a[6].constant.toBool() && a[8].kind == PlannedArg::Kind::Constant &&
                       a[8].constant.isInt() &&
                       (a[2].kind == PlannedArg::Kind::Slot || is_none(a[2]));
    if (!plain) return std::nullopt;
    const ValueId w = a[1].slot;
    const auto input_sizes = static_sizes(graph, a[0].slot, at::kFloat, 4);
    const auto weight_sizes = static_sizes(graph, w, at::kFloat, 4);
    if (!input_sizes || !weight_sizes || !weight_only[w] || use.readers[w] != 1 ||
        use.is_output[w] || a[0].slot == w) {
      return std::nullopt;
    }
    const Conv2dCase conv{*input_sizes, *weight_sizes, *stride, *padding, *dilation,
                          a[8].constant.toInt(), a[2].kind == PlannedArg::Kind::Slot};
    const bool onednn = choice == OneDnnChoice::OneDnn
                            ? OneDnnBenchmark::conv_macs(conv) >= 0
                            : aten_picks_onednn_at(conv) || (choice == OneDnnChoice::Benchmark &&
                                                             benchmark.conv_faster(conv));
    if (!onednn) return std::nullopt;
    // the packed weight replaces the dense one in its slot
    return PackedPair{
        packing_of(ins, prepack_conv2d_weight_op(), {a[1], a[3], a[4], a[5], a[8]}, w),
        native_for(ins, conv2d_prepacked_op(),
                   {a[0], a[1], a[2], a[3], a[4], a[5], a[8],
                    constant_arg(static_cast<int64_t>(at::get_num_threads()))})};
  });
}

}  // namespace pt2rt
