// runtime/plan/prepack_linears.cpp — see prepack_linears.h.
#include "plan/prepack_linears.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>
#include <optional>

#include "kernels/linear_prepack.h"
#include "plan/plan_rewrite.h"

namespace pt2rt {

size_t prepack_linears(std::vector<Instruction>& instructions, const Graph& graph,
                       const std::vector<bool>& weight_only, OneDnnChoice choice,
                       OneDnnBenchmark& benchmark) {
  if (choice == OneDnnChoice::Aten || !at::hasMKLDNN() ||
      !at::globalContext().userEnabledMkldnn()) {
    return 0;
  }
  const SlotUse use = slot_use(instructions, graph);
  return replace_packed(instructions, [&](const Instruction& ins) -> std::optional<PackedPair> {
    const bool addmm = is_op(ins, "aten::addmm", "") && ins.args.size() == 5 &&
                       number(ins.args[3]) == 1.0 && number(ins.args[4]) == 1.0;
    const bool mm = is_op(ins, "aten::mm", "") && ins.args.size() == 2;
    if (!(addmm || mm) || ins.outputs.size() != 1) return std::nullopt;
    const std::vector<PlannedArg>& a = ins.args;
    const size_t x_arg = addmm ? 1 : 0, w_arg = x_arg + 1;
    if (a[x_arg].kind != PlannedArg::Kind::Slot || a[w_arg].kind != PlannedArg::Kind::Slot ||
        (addmm && a[0].kind != PlannedArg::Kind::Slot)) {
      return std::nullopt;
    }
    const ValueId w = a[w_arg].slot;
    const auto x = static_sizes(graph, a[x_arg].slot, at::kFloat, 2);
    const auto wt = static_sizes(graph, w, at::kFloat, 2);
    const auto bias = addmm ? static_sizes(graph, a[0].slot, at::kFloat, 1) : std::nullopt;
    if (!x || !wt || (addmm && !bias) || !weight_only[w] || use.readers[w] != 1 ||
        use.is_output[w] || a[x_arg].slot == w || (addmm && a[0].slot == w) ||
        (*x)[1] != (*wt)[0] || (addmm && (*bias)[0] != (*wt)[1])) {
      return std::nullopt;
    }
    const LinearCase c{(*x)[0], (*x)[1], (*wt)[1], addmm};
    if (!(choice == OneDnnChoice::OneDnn ? OneDnnBenchmark::linear_macs(c) >= 0
                                         : benchmark.linear_faster(c))) {
      return std::nullopt;
    }
    // the packed weight replaces Wt in its slot
    return PackedPair{packing_of(ins, prepack_linear_weight_op(), {a[w_arg]}, w),
                      native_for(ins, linear_prepacked_op(),
                                 {a[x_arg], a[w_arg], mm ? constant_arg(c10::IValue()) : a[0]})};
  });
}

}  // namespace pt2rt
