// runtime/plan/fuse_batch_norm_stats.cpp — see fuse_batch_norm_stats.h.
#include "plan/fuse_batch_norm_stats.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <tuple>

#include "kernels/batch_norm_stats.h"
#include "plan/plan_rewrite.h"

namespace pt2rt {
namespace {

// ---- matching ---------------------------------------------------------------------------

class Matcher {
 public:
  Matcher(const std::vector<Instruction>& instructions, const Graph& graph)
      : ins_(instructions), graph_(graph), readers_(graph.values.size()),
        is_input_(graph.values.size(), false), is_output_(graph.values.size(), false) {
    std::vector<ValueId> used;
    for (size_t i = 0; i < ins_.size(); ++i) {
      used.clear();
      for (const PlannedArg& a : ins_[i].args) collect_slots(a, used);
      for (ValueId v : used) {
        if (readers_[v].empty() || readers_[v].back() != i) readers_[v].push_back(i);
      }
    }
    for (const GraphInput& in : graph.inputs) is_input_[in.value] = true;
    for (const GraphOutput& out : graph.outputs) {
      if (out.value >= 0) is_output_[static_cast<size_t>(out.value)] = true;
    }
  }

  /// The group of the native_batch_norm at `i`: the indices of the instructions it replaces
  /// (the two lerps and what computes the unbiased variance) and the fused instruction, or
  /// nullopt.
  std::optional<std::pair<std::vector<size_t>, Instruction>> match(size_t i) const {
    const Instruction& bn = ins_[i];
    if (!is_op(bn, "aten::native_batch_norm", "") || bn.args.size() != 8 || bn.outputs.size() != 3 ||
        bn.args[0].kind != PlannedArg::Kind::Slot || !is_none(bn.args[3]) || !is_none(bn.args[4]) ||
        bn.args[5].kind != PlannedArg::Kind::Constant || !bn.args[5].constant.isBool() ||
        !bn.args[5].constant.toBool()) {
      return std::nullopt;
    }
    const std::optional<double> momentum = number(bn.args[6]), eps = number(bn.args[7]);
    const ValueId x = bn.args[0].slot;
    const std::optional<int64_t> channels = static_channels(x);
    if (!momentum || !eps || !channels) return std::nullopt;
    const c10::ScalarType dtype = graph_.values[x].meta->dtype;
    const ValueId mean = bn.outputs[1], invstd = bn.outputs[2];

    auto stat_input = [&](const Instruction& lerp) -> std::optional<ValueId> {
      if (lerp.args.size() != 3 || lerp.args[0].kind != PlannedArg::Kind::Slot ||
          number(lerp.args[2]) != momentum || lerp.outputs.size() != 1) {
        return std::nullopt;
      }
      const ValueId stat = lerp.args[0].slot;
      if (!is_input_[stat] || !is_stat(stat, dtype, *channels) ||
          !is_stat(lerp.outputs[0], dtype, *channels)) {
        return std::nullopt;
      }
      for (size_t r : readers_[stat]) {
        if (ins_[r].mutates) return std::nullopt;
      }
      return stat;
    };

    std::optional<size_t> lerp_mean;
    for (size_t r : readers_[mean]) {
      if (is_op(ins_[r], "aten::lerp", "Scalar") && reads_slot(ins_[r], 1, mean) &&
          !reads_slot(ins_[r], 0, mean) && stat_input(ins_[r])) {
        if (lerp_mean) return std::nullopt;  // two candidates: leave the graph as written
        lerp_mean = r;
      }
    }
    if (!lerp_mean) return std::nullopt;
    // The unbiased batch variance: from save_invstd times n / (n - 1) (static sizes), or a
    // var.correction pass over the input (a symbolic per-channel count: factor 0).
    std::optional<std::vector<size_t>> unbiased;
    double factor = 0;
    if (const std::optional<int64_t> n = static_per_channel(x)) {
      if (*n <= 1) return std::nullopt;
      factor = static_cast<double>(*n) / static_cast<double>(*n - 1);
      unbiased = variance_from_invstd(invstd, *eps, factor);
    } else {
      unbiased = variance_pass(x);
    }
    if (!unbiased) return std::nullopt;
    const std::optional<size_t> lerp_var =
        sole_reader(ins_[unbiased->back()], "aten::lerp", "Scalar", 1);
    if (!lerp_var) return std::nullopt;
    const std::optional<ValueId> running_mean = stat_input(ins_[*lerp_mean]);
    const std::optional<ValueId> running_var = stat_input(ins_[*lerp_var]);
    if (!running_mean || !running_var) return std::nullopt;

    const bool in_place = updated_buffer(*running_mean, ins_[*lerp_mean].outputs[0]) &&
                          updated_buffer(*running_var, ins_[*lerp_var].outputs[0]);
    Instruction fused;
    fused.native = &batch_norm_with_stats_op();
    fused.args = {bn.args[0], bn.args[1], bn.args[2], slot_arg(*running_mean),
                  slot_arg(*running_var), constant_arg(*momentum), constant_arg(*eps),
                  constant_arg(factor), PlannedArg{}};
    fused.args.back().constant = in_place;
    fused.outputs = {bn.outputs[0], mean, invstd, ins_[*lerp_mean].outputs[0],
                     ins_[*lerp_var].outputs[0]};
    fused.node = bn.node;
    fused.checks = bn.checks;
    fused.alloc_cap = bn.alloc_cap;
    std::vector<size_t> group{*lerp_mean, *lerp_var};
    group.insert(group.end(), unbiased->begin(), unbiased->end());
    return std::make_pair(std::move(group), std::move(fused));
  }

 private:
  /// n of a static input x: elements per channel.
  std::optional<int64_t> static_per_channel(ValueId x) const {
    const std::vector<int64_t> sizes = static_sizes(x);
    if (sizes.size() < 2) return std::nullopt;
    return batch_norm_per_channel(sizes);
  }

  /// pow(save_invstd, -2) → sub(·, eps) → mul(·, factor), each read only by the next.
  std::optional<std::vector<size_t>> variance_from_invstd(ValueId invstd, double eps,
                                                          double factor) const {
    std::optional<size_t> pow;
    for (size_t r : readers_[invstd]) {
      if (is_op(ins_[r], "aten::pow", "Tensor_Scalar") && reads_slot(ins_[r], 0, invstd) &&
          ins_[r].args.size() == 2 && number(ins_[r].args[1]) == -2.0) {
        if (pow) return std::nullopt;  // two candidates: leave the graph as written
        pow = r;
      }
    }
    if (!pow) return std::nullopt;
    const std::optional<size_t> sub = sole_reader(ins_[*pow], "aten::sub", "Tensor");
    if (!sub || ins_[*sub].args.size() != 3 || number(ins_[*sub].args[1]) != eps ||
        number(ins_[*sub].args[2]) != 1.0) {
      return std::nullopt;
    }
    const std::optional<size_t> mul = sole_reader(ins_[*sub], "aten::mul", "Tensor");
    if (!mul || ins_[*mul].args.size() != 2 || number(ins_[*mul].args[1]) != factor) {
      return std::nullopt;
    }
    return std::vector<size_t>{*pow, *sub, *mul};
  }

  /// var.correction(x, [0, 2, ..., rank - 1], correction=1, keepdim=False).
  std::optional<std::vector<size_t>> variance_pass(ValueId x) const {
    const size_t rank = graph_.values[x].meta->sizes.size();
    std::optional<size_t> var;
    for (size_t r : readers_[x]) {
      const Instruction& v = ins_[r];
      if (!is_op(v, "aten::var", "correction") || !reads_slot(v, 0, x) || v.args.size() != 4 ||
          v.outputs.size() != 1 || number(v.args[2]) != 1.0 ||
          v.args[3].kind != PlannedArg::Kind::Constant || !v.args[3].constant.isBool() ||
          v.args[3].constant.toBool()) {
        continue;
      }
      // Constant int lists are planned as constants (a list with a SymInt in it is not the
      // channel dims).
      const PlannedArg& dims = v.args[1];
      if (dims.kind != PlannedArg::Kind::Constant || !dims.constant.isIntList()) continue;
      const std::vector<int64_t> list = dims.constant.toIntVector();
      bool channel_dims = list.size() == rank - 1;
      for (size_t k = 0; channel_dims && k < list.size(); ++k) {
        channel_dims = list[k] == static_cast<int64_t>(k == 0 ? 0 : k + 1);
      }
      if (!channel_dims) continue;
      if (var) return std::nullopt;
      var = r;
    }
    if (!var) return std::nullopt;
    return std::vector<size_t>{*var};
  }

  /// Whether `stat` is a buffer input that only the group reads and whose InputMutation
  /// output is `updated`: the model's own buffer, which the copy-back overwrites with
  /// `updated` anyway, so the kernel may update it in place as eager does.
  bool updated_buffer(ValueId stat, ValueId updated) const {
    if (is_output_[stat] || readers_[stat].size() != 1) return false;
    const InputDescriptor* buffer = nullptr;
    for (const GraphInput& in : graph_.inputs) {
      if (in.value == stat) buffer = &in.descriptor;
    }
    if (!buffer || buffer->kind != InputKind::Buffer) return false;
    size_t mutations = 0;
    bool matches = false;
    for (const GraphOutput& out : graph_.outputs) {
      if (out.descriptor.kind != OutputKind::InputMutation || !out.descriptor.of ||
          !(*out.descriptor.of == *buffer)) {
        continue;
      }
      ++mutations;
      matches = out.value == static_cast<int64_t>(updated);
    }
    return mutations == 1 && matches;
  }

  /// The declared sizes of a float32/float64 tensor value with only static dims; empty when
  /// it has none of those.
  std::vector<int64_t> static_sizes(ValueId v) const {
    const Value& value = graph_.values[v];
    std::vector<int64_t> sizes;
    if (value.kind != ValueKind::Tensor || !value.meta) return sizes;
    for (const Dim& d : value.meta->sizes) {
      if (!d.is_static()) return {};
      sizes.push_back(d.value);
    }
    return sizes;
  }
  /// The static channel count of a float32/float64 input of rank >= 2 (its other dims may
  /// be symbolic).
  std::optional<int64_t> static_channels(ValueId x) const {
    const Value& value = graph_.values[x];
    if (value.kind != ValueKind::Tensor || !value.meta || value.meta->sizes.size() < 2 ||
        !value.meta->sizes[1].is_static() ||
        (value.meta->dtype != at::kFloat && value.meta->dtype != at::kDouble)) {
      return std::nullopt;
    }
    return value.meta->sizes[1].value;
  }
  bool is_stat(ValueId v, c10::ScalarType dtype, int64_t channels) const {
    const std::vector<int64_t> sizes = static_sizes(v);
    return sizes.size() == 1 && sizes[0] == channels && graph_.values[v].meta->dtype == dtype;
  }
  /// The one instruction that reads `producer`'s single output, when it is `name.overload`
  /// reading it as argument `k` only and the output is not a graph output.
  std::optional<size_t> sole_reader(const Instruction& producer, const char* name,
                                    const char* overload, size_t k = 0) const {
    if (producer.outputs.size() != 1) return std::nullopt;
    const ValueId v = producer.outputs[0];
    if (is_output_[v] || readers_[v].size() != 1) return std::nullopt;
    const Instruction& r = ins_[readers_[v][0]];
    if (!is_op(r, name, overload) || !reads_slot(r, k, v) || r.outputs.size() != 1) return std::nullopt;
    for (size_t j = 0; j < r.args.size(); ++j) {
      if (j != k && reads_slot(r, j, v)) return std::nullopt;
    }
    return readers_[v][0];
  }

  const std::vector<Instruction>& ins_;
  const Graph& graph_;
  std::vector<std::vector<size_t>> readers_;  ///< per slot, the instructions reading it
  std::vector<bool> is_input_, is_output_;
};

}  // namespace

size_t fuse_batch_norm_stats(std::vector<Instruction>& instructions, const Graph& graph) {
  const Matcher matcher(instructions, graph);
  std::vector<bool> removed(instructions.size(), false);
  std::vector<std::pair<size_t, Instruction>> fused;
  for (size_t i = 0; i < instructions.size(); ++i) {
    auto group = matcher.match(i);
    if (!group) continue;
    bool free = true;  // each instruction belongs to at most one group
    for (size_t r : group->first) free = free && !removed[r];
    if (!free) continue;
    for (size_t r : group->first) removed[r] = true;
    fused.emplace_back(i, std::move(group->second));
  }
  if (fused.empty()) return 0;
  for (auto& [i, ins] : fused) instructions[i] = std::move(ins);
  std::vector<Instruction> kept;
  kept.reserve(instructions.size());
  for (size_t i = 0; i < instructions.size(); ++i) {
    if (!removed[i]) kept.push_back(std::move(instructions[i]));
  }
  instructions = std::move(kept);
  return fused.size();
}

}  // namespace pt2rt
