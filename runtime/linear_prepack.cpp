// runtime/linear_prepack.cpp — see linear_prepack.h.
#include "linear_prepack.h"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <optional>

#include "plan_rewrite.h"

namespace pt2rt {
namespace {

bool dense_float(const at::Tensor& t, int64_t dim) {
  return t.is_cpu() && t.layout() == c10::kStrided && t.scalar_type() == at::kFloat &&
         t.dim() == dim;
}

void prepack_linear_weight_kernel(torch::jit::Stack& s) {
  const at::Tensor weight_t = s[0].toTensor();
  s.clear();
  s.emplace_back(dense_float(weight_t, 2) ? weight_t.t().contiguous().to_mkldnn() : weight_t);
}

void linear_prepacked_kernel(torch::jit::Stack& s) {
  const c10::optional<at::Tensor> bias = s[2].toOptional<at::Tensor>();
  const at::Tensor weight = s[1].toTensor(), input = s[0].toTensor();
  s.clear();
  if (weight.is_mkldnn() && dense_float(input, 2) && (!bias || dense_float(*bias, 1))) {
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

size_t prepack_linears(std::vector<Instruction>& instructions, const Graph& graph,
                       const std::vector<bool>& weight_only, OneDnnChoice choice,
                       OneDnnBenchmark& benchmark) {
  if (choice == OneDnnChoice::Aten || !at::hasMKLDNN() ||
      !at::globalContext().userEnabledMkldnn()) {
    return 0;
  }
  const SlotUse use = slot_use(instructions, graph);
  std::vector<Instruction> rewritten;
  rewritten.reserve(instructions.size());
  size_t count = 0;
  for (Instruction& ins : instructions) {
    const bool addmm = is_op(ins, "aten::addmm", "") && ins.args.size() == 5 &&
                       number(ins.args[3]) == 1.0 && number(ins.args[4]) == 1.0;
    const bool mm = is_op(ins, "aten::mm", "") && ins.args.size() == 2;
    const size_t x_arg = addmm ? 1 : 0, w_arg = x_arg + 1;
    const std::vector<PlannedArg>& a = ins.args;
    bool eligible = (addmm || mm) && ins.outputs.size() == 1 &&
                    a[x_arg].kind == PlannedArg::Kind::Slot &&
                    a[w_arg].kind == PlannedArg::Kind::Slot &&
                    (mm || a[0].kind == PlannedArg::Kind::Slot);
    std::optional<std::vector<int64_t>> x, wt, bias;
    if (eligible) {
      const ValueId w = a[w_arg].slot;
      x = static_sizes(graph, a[x_arg].slot, at::kFloat, 2);
      wt = static_sizes(graph, w, at::kFloat, 2);
      if (addmm) bias = static_sizes(graph, a[0].slot, at::kFloat, 1);
      eligible = x && wt && (mm || bias) && weight_only[w] && use.readers[w] == 1 &&
                 !use.is_output[w] && a[x_arg].slot != w && (mm || a[0].slot != w) &&
                 (*x)[1] == (*wt)[0] && (mm || (*bias)[0] == (*wt)[1]);
    }
    if (eligible) {
      const LinearCase c{(*x)[0], (*x)[1], (*wt)[1], addmm};
      eligible = choice == OneDnnChoice::OneDnn ? OneDnnBenchmark::linear_macs(c) >= 0
                                                : benchmark.linear_faster(c);
    }
    if (!eligible) {
      rewritten.push_back(std::move(ins));
      continue;
    }
    Instruction pack;
    pack.native = &prepack_linear_weight_op();
    pack.args = {a[w_arg]};
    pack.outputs = {a[w_arg].slot};  // the packed weight replaces Wt in its slot
    pack.node = ins.node;
    pack.packs = true;
    Instruction linear;
    linear.native = &linear_prepacked_op();
    linear.args = {a[x_arg], a[w_arg], mm ? constant_arg(c10::IValue()) : a[0]};
    linear.outputs = ins.outputs;
    linear.node = ins.node;
    linear.checks = ins.checks;
    linear.alloc_cap = ins.alloc_cap;
    rewritten.push_back(std::move(pack));
    rewritten.push_back(std::move(linear));
    ++count;
  }
  instructions = std::move(rewritten);
  return count;
}

}  // namespace pt2rt
