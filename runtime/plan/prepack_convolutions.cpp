// runtime/plan/prepack_convolutions.cpp — see prepack_convolutions.h.
#include "plan/prepack_convolutions.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <optional>

#include "core/libtorch_compat.h"
#include "kernels/conv_prepack.h"
#include "plan/plan_rewrite.h"

namespace pt2rt {
namespace {

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
