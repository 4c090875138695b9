// runtime/plan/plan_rewrite.cpp — see plan_rewrite.h.
#include "plan/plan_rewrite.h"

#include <ATen/core/Tensor.h>

namespace pt2rt {

bool is_op(const Instruction& ins, const char* name, const char* overload) {
  if (!ins.op || ins.native) return false;
  const c10::OperatorName& n = ins.op->operator_name();
  return n.name == name && n.overload_name == overload;
}

bool is_none(const PlannedArg& a) {
  return a.kind == PlannedArg::Kind::Constant && a.constant.isNone();
}

std::optional<double> number(const PlannedArg& a) {
  if (a.kind != PlannedArg::Kind::Constant) return std::nullopt;
  const c10::IValue& c = a.constant;
  if (c.isDouble()) return c.toDouble();
  if (c.isInt()) return static_cast<double>(c.toInt());
  if (c.isTensor() && c.toTensor().defined() && c.toTensor().dim() == 0 &&
      c.toTensor().is_cpu()) {
    return c.toTensor().item<double>();
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> int_list(const PlannedArg& a, size_t size) {
  if (a.kind != PlannedArg::Kind::Constant || !a.constant.isIntList()) return std::nullopt;
  std::vector<int64_t> v = a.constant.toIntVector();
  if (v.size() != size) return std::nullopt;
  return v;
}

bool reads_slot(const Instruction& ins, size_t k, ValueId v) {
  return ins.args.size() > k && ins.args[k].kind == PlannedArg::Kind::Slot && ins.args[k].slot == v;
}

std::optional<std::vector<int64_t>> static_sizes(const Graph& graph, ValueId v,
                                                 c10::ScalarType dtype, size_t rank) {
  const Value& value = graph.values[v];
  if (value.kind != ValueKind::Tensor || !value.meta || value.meta->dtype != dtype ||
      value.meta->sizes.size() != rank) {
    return std::nullopt;
  }
  std::vector<int64_t> sizes;
  for (const Dim& d : value.meta->sizes) {
    if (!d.is_static()) return std::nullopt;
    sizes.push_back(d.value);
  }
  return sizes;
}

PlannedArg constant_arg(c10::IValue v) {
  PlannedArg a;
  a.constant = std::move(v);
  return a;
}

PlannedArg slot_arg(ValueId v) {
  PlannedArg a;
  a.kind = PlannedArg::Kind::Slot;
  a.slot = v;
  return a;
}

SlotUse slot_use(const std::vector<Instruction>& instructions, const Graph& graph) {
  SlotUse u;
  u.readers.assign(graph.values.size(), 0);
  u.is_output.assign(graph.values.size(), false);
  std::vector<ValueId> used;
  for (const Instruction& ins : instructions) {
    used.clear();
    for (const PlannedArg& a : ins.args) collect_slots(a, used);
    for (ValueId v : used) ++u.readers[v];
  }
  for (const GraphOutput& out : graph.outputs) {
    if (out.value >= 0) u.is_output[static_cast<size_t>(out.value)] = true;
  }
  return u;
}

Instruction packing_of(const Instruction& original, const NativeOp& op,
                       std::vector<PlannedArg> args, ValueId slot) {
  Instruction p;
  p.native = &op;
  p.args = std::move(args);
  p.outputs = {slot};
  p.node = original.node;
  p.packs = true;
  return p;
}

Instruction native_for(const Instruction& original, const NativeOp& op,
                       std::vector<PlannedArg> args) {
  Instruction c;
  c.native = &op;
  c.args = std::move(args);
  c.outputs = original.outputs;
  c.node = original.node;
  c.checks = original.checks;
  c.alloc_cap = original.alloc_cap;
  return c;
}

size_t replace_packed(std::vector<Instruction>& instructions,
                      const std::function<std::optional<PackedPair>(const Instruction&)>& rewrite) {
  std::vector<Instruction> rewritten;
  rewritten.reserve(instructions.size());
  size_t count = 0;
  for (Instruction& ins : instructions) {
    std::optional<PackedPair> pair = rewrite(ins);
    if (!pair) {
      rewritten.push_back(std::move(ins));
      continue;
    }
    rewritten.push_back(std::move(pair->pack));
    rewritten.push_back(std::move(pair->compute));
    ++count;
  }
  instructions = std::move(rewritten);
  return count;
}

}  // namespace pt2rt
