// runtime/plan/plan_rewrite.h — queries and builders shared by the passes that
// rewrite a plan's instruction list at build (batch_norm_stats.h, conv_prepack.h,
// linear_prepack.h): what an instruction is, what its constant arguments hold, the declared static
// sizes of a value, who reads each slot, and the replacement of one instruction by a weight packing
// plus the native instruction that reads the packed weight.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "plan/plan.h"

namespace pt2rt {

/// A dispatcher-op instruction of op `name` ("aten::addmm") and overload ("" for none).
bool is_op(const Instruction& ins, const char* name, const char* overload);

/// A constant None argument.
bool is_none(const PlannedArg& a);

/// A constant argument's number: a Scalar, or a 0-dim CPU tensor (a wrapped Python number).
std::optional<double> number(const PlannedArg& a);

/// A constant int[] argument of exactly `size` elements.
std::optional<std::vector<int64_t>> int_list(const PlannedArg& a, size_t size);

/// Whether argument `k` of `ins` is slot `v`.
bool reads_slot(const Instruction& ins, size_t k, ValueId v);

/// The declared sizes of tensor value `v` when it is of `dtype`, has `rank` dims and all of
/// them are static; nullopt otherwise.
std::optional<std::vector<int64_t>> static_sizes(const Graph& graph, ValueId v,
                                                 c10::ScalarType dtype, size_t rank);

/// A constant argument / a slot argument.
PlannedArg constant_arg(c10::IValue v);
PlannedArg slot_arg(ValueId v);

/// Per graph value: how many of `instructions` read it, and whether it is a graph output.
struct SlotUse {
  std::vector<size_t> readers;
  std::vector<bool> is_output;
};
SlotUse slot_use(const std::vector<Instruction>& instructions, const Graph& graph);

/// One instruction replaced by two: `pack` writes a packed form of a weight-only value into
/// that value's slot (Instruction::packs: hoisted into the cached prologue), `compute` reads it.
struct PackedPair {
  Instruction pack, compute;
};

/// `pack` for `original`: native `op` on `args`, its result into `slot`.
Instruction packing_of(const Instruction& original, const NativeOp& op,
                       std::vector<PlannedArg> args, ValueId slot);
/// `compute` for `original`: native `op` on `args` with `original`'s outputs, node, result
/// checks and allocation cap.
Instruction native_for(const Instruction& original, const NativeOp& op,
                       std::vector<PlannedArg> args);

/// Replaces, in order, each instruction for which `rewrite` gives a PackedPair by that pair
/// (pack first). @returns the number replaced.
size_t replace_packed(std::vector<Instruction>& instructions,
                      const std::function<std::optional<PackedPair>(const Instruction&)>& rewrite);

}  // namespace pt2rt
