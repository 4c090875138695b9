// runtime/model/randomness.cpp — see pt2rt/randomness.h.
#include "pt2rt/randomness.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/version.h>

#include <vector>

namespace pt2rt {
namespace {

bool draws_random(const Operator& op) {
  auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName(op.name, op.overload));
  return handle && handle->hasTag(at::Tag::nondeterministic_seeded);
}

/// Per value of `graph`: whether it depends on a random draw, given the tainted inputs.
/// `random_op[i]`: Program::operators[i] draws random numbers.
std::vector<bool> taint(const std::vector<bool>& random_op, const Graph& graph,
                        std::vector<bool> tainted) {
  tainted.resize(graph.values.size(), false);
  auto is_tainted = [&](int64_t v) {
    return v >= 0 && static_cast<size_t>(v) < tainted.size() && tainted[v];
  };
  auto mark_from = [&](const ArgumentValue& value) {
    if (const auto* t = std::get_if<TensorRef>(&value)) return is_tainted(t->value);
    if (const auto* t = std::get_if<TensorListRef>(&value)) return is_tainted(t->value);
    if (const auto* l = std::get_if<TensorListArg>(&value)) {
      for (ValueId v : l->values) {
        if (is_tainted(v)) return true;
      }
    }
    if (const auto* l = std::get_if<OptionalTensorListArg>(&value)) {
      for (int64_t v : l->values) {
        if (is_tainted(v)) return true;
      }
    }
    return false;
  };
  for (const Node& node : graph.nodes) {
    bool t = node.op < random_op.size() && random_op[node.op];
    for (const Argument& a : node.args) t = t || mark_from(a.value);
    if (!t) continue;
    for (ValueId v : node.outputs) {
      if (v < tainted.size()) tainted[v] = true;
    }
  }
  return tainted;
}

bool tainted_output(const std::vector<bool>& tainted, const GraphOutput& out) {
  return out.value >= 0 && static_cast<size_t>(out.value) < tainted.size() && tainted[out.value];
}

}  // namespace

RandomDependence random_dependence(const Program& program) {
  RandomDependence r;
  std::vector<bool> random_op(program.operators.size());
  for (size_t i = 0; i < program.operators.size(); ++i) {
    random_op[i] = draws_random(program.operators[i]);
    r.any = r.any || random_op[i];
  }
  if (!r.any) return r;
  if (const Graph* g = program.graph(GraphRole::Inference)) {
    std::vector<bool> t = taint(random_op, *g, {});
    for (const GraphOutput& out : g->outputs) {
      if (out.descriptor.kind == OutputKind::Plain && tainted_output(t, out)) {
        r.outputs.insert(out.descriptor.idx);
      }
    }
  }
  const Graph* fw = program.graph(GraphRole::Forward);
  if (!fw) return r;
  std::vector<bool> t = taint(random_op, *fw, {});
  std::set<int64_t> saved;
  for (const GraphOutput& out : fw->outputs) {
    if (!tainted_output(t, out)) continue;
    const OutputDescriptor& d = out.descriptor;
    if (d.kind == OutputKind::Plain) r.train_outputs.insert(d.idx);
    if (d.kind == OutputKind::Saved || d.kind == OutputKind::SavedNoVcCheck) saved.insert(d.idx);
    if (d.kind == OutputKind::InputMutation && d.of && d.of->kind == InputKind::Buffer) {
      r.buffers.insert(d.of->fqn);
    }
  }
  const Graph* bw = program.graph(GraphRole::Backward);
  if (!bw) return r;
  std::vector<bool> in(bw->values.size(), false);
  for (const GraphInput& input : bw->inputs) {
    const InputDescriptor& d = input.descriptor;
    // A tangent is the cotangent of an output: random when that output is (verify feeds the
    // references' grad_outputs, but a caller's cotangents may come from the outputs).
    bool random = (d.kind == InputKind::Saved && saved.count(d.idx)) ||
                  (d.kind == InputKind::Tangent && d.output && d.output->kind == OutputKind::Plain &&
                   r.train_outputs.count(d.output->idx));
    if (random && input.value < in.size()) in[input.value] = true;
  }
  std::vector<bool> tb = taint(random_op, *bw, std::move(in));
  for (const GraphOutput& out : bw->outputs) {
    const OutputDescriptor& d = out.descriptor;
    if (d.kind != OutputKind::Grad || !d.of || !tainted_output(tb, out)) continue;
    if (d.of->kind == InputKind::Param) r.grads.insert(d.of->fqn);
    if (d.of->kind == InputKind::Plain) r.grads.insert("input:" + std::to_string(d.of->idx));
  }
  return r;
}

std::optional<uint64_t> reference_rng_seed(const Program& program) {
  auto it = program.metadata.find("reference_rng_seed");
  if (it == program.metadata.end()) return std::nullopt;
  try {
    size_t used = 0;
    unsigned long long seed = std::stoull(it->second, &used);
    if (used != it->second.size()) return std::nullopt;
    return static_cast<uint64_t>(seed);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string running_libtorch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

bool draws_in_eagers_order(const Program& program) {
  auto it = program.metadata.find("reference_draws");
  return it == program.metadata.end() || it->second != "differ";
}

bool replays_reference_draws(const Program& program, const c10::Device& device) {
  if (!reference_rng_seed(program) || !device.is_cpu() || !draws_in_eagers_order(program)) {
    return false;
  }
  const std::string running =
      std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + ".";
  return program.producer.torch_version.compare(0, running.size(), running) == 0;
}

}  // namespace pt2rt
