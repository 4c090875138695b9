// runtime/exec/bindings.cpp — see bindings.h.
#include "exec/bindings.h"

#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

class Binder {
 public:
  Binder(const Program& program, const Graph& graph, const WeightIndex& weights)
      : program_(program), graph_(graph), weights_(weights) {}

  GraphBindings run() {
    GraphBindings b;
    std::vector<int64_t> user_inputs, saved_in, tangents;
    for (size_t i = 0; i < graph_.inputs.size(); ++i) {
      const InputDescriptor& d = graph_.inputs[i].descriptor;
      where_ = "input " + std::to_string(i) + " " + d.to_string();
      switch (d.kind) {
        case InputKind::Param:
        case InputKind::Buffer:
        case InputKind::Constant:
          b.inputs.push_back({InputSource::Weight, weight(d)});
          break;
        case InputKind::Plain:
          require_role(graph_.role != GraphRole::Backward);
          b.inputs.push_back({InputSource::UserInput, claim(user_inputs, d.idx, i)});
          break;
        case InputKind::Saved:
          require_role(graph_.role == GraphRole::Backward);
          b.inputs.push_back({InputSource::Saved, claim(saved_in, d.idx, i)});
          break;
        case InputKind::Tangent: {
          require_role(graph_.role == GraphRole::Backward);
          if (!d.output || d.output->kind != OutputKind::Plain) {
            fail("only tangents of Plain outputs are supported");
          }
          b.inputs.push_back({InputSource::Tangent, claim(tangents, d.output->idx, i)});
          break;
        }
        default:
          fail(std::string("descriptor kind ") + to_string(d.kind) +
               " is not handled by this runtime");
      }
    }
    b.user_input_positions = dense(user_inputs, "Plain inputs");
    b.num_saved = dense(saved_in, "Saved inputs").size();
    b.num_tangents = tangents.size();

    std::vector<int64_t> user_outputs, saved_out;
    for (size_t j = 0; j < graph_.outputs.size(); ++j) {
      const GraphOutput& out = graph_.outputs[j];
      const OutputDescriptor& d = out.descriptor;
      where_ = "output " + std::to_string(j) + " " + d.to_string();
      switch (d.kind) {
        case OutputKind::Plain:
          require_role(graph_.role != GraphRole::Backward);
          b.outputs.push_back({OutputSink::UserOutput, claim(user_outputs, d.idx, out.value),
                               out.value});
          break;
        case OutputKind::Saved:
        case OutputKind::SavedNoVcCheck: {
          require_role(graph_.role == GraphRole::Forward);
          size_t k = claim(saved_out, d.idx, j);
          b.outputs.push_back({OutputSink::Saved, k, out.value});
          if (d.kind == OutputKind::SavedNoVcCheck) {
            if (b.saved_without_version_check.size() <= k) {
              b.saved_without_version_check.resize(k + 1, false);
            }
            b.saved_without_version_check[k] = true;
          }
          break;
        }
        case OutputKind::InputMutation:
          require_role(graph_.role != GraphRole::Backward);
          if (!d.of) fail("InputMutation without the mutated input");
          if (d.of->kind == InputKind::Buffer || d.of->kind == InputKind::Param) {
            // A parameter updated in forward (nn.Embedding(max_norm=...)'s
            // embedding_renorm_): written back under no grad after the call, as eager's
            // in-place update under torch.no_grad() leaves it.
            b.outputs.push_back({OutputSink::MutatedWeight, weight(*d.of), out.value});
          } else if (d.of->kind == InputKind::Plain) {
            b.outputs.push_back({OutputSink::MutatedUserInput, size_t(d.of->idx), out.value});
          } else {
            fail("only mutations of parameters, buffers and plain inputs are supported");
          }
          break;
        case OutputKind::Grad:
          require_role(graph_.role == GraphRole::Backward);
          if (!d.of) fail("Grad without the input it is the gradient of");
          if (d.of->kind == InputKind::Param) {
            b.outputs.push_back({OutputSink::WeightGrad, weight(*d.of), out.value});
          } else if (d.of->kind == InputKind::Plain) {
            b.outputs.push_back({OutputSink::UserInputGrad, size_t(d.of->idx), out.value});
          } else {
            fail("only gradients of parameters and plain inputs are supported");
          }
          break;
        default:
          fail(std::string("descriptor kind ") + to_string(d.kind) +
               " is not handled by this runtime");
      }
      if (out.value < -1 || out.value >= static_cast<int64_t>(graph_.values.size())) {
        fail("value " + std::to_string(out.value) + " out of range");
      }
    }
    std::vector<size_t> out_positions = dense(user_outputs, "Plain outputs");
    for (size_t v : out_positions) b.user_output_values.push_back(static_cast<int64_t>(v));
    if (graph_.role == GraphRole::Forward) b.num_saved = dense(saved_out, "Saved outputs").size();
    b.saved_without_version_check.resize(b.num_saved, false);
    return b;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(std::string("program.fb: graph ") + to_string(graph_.role) + ", " + where_ +
                      ": " + what);
  }

  void require_role(bool ok) const {
    if (!ok) fail(std::string("not allowed in a ") + to_string(graph_.role) + " graph");
  }

  size_t weight(const InputDescriptor& d) const {
    auto it = weights_.find(d.fqn);
    if (it == weights_.end()) fail("no weight named '" + d.fqn + "'");
    WeightKind want = d.kind == InputKind::Param    ? WeightKind::Parameter
                      : d.kind == InputKind::Buffer ? WeightKind::Buffer
                                                    : WeightKind::Constant;
    WeightKind got = program_.weights[it->second].kind;
    if (got != want) {
      fail("weight '" + d.fqn + "' is a " + to_string(got) + ", not a " + to_string(want));
    }
    return it->second;
  }

  /// Records `payload` at index `idx` of `slots` (-1 = unset) and returns idx.
  size_t claim(std::vector<int64_t>& slots, int64_t idx, int64_t payload) const {
    if (idx < 0 || idx > (1 << 20)) fail("index " + std::to_string(idx) + " out of range");
    if (slots.size() <= static_cast<size_t>(idx)) slots.resize(idx + 1, kUnset);
    if (slots[idx] != kUnset) fail("index " + std::to_string(idx) + " appears twice");
    slots[idx] = payload;
    return static_cast<size_t>(idx);
  }

  /// Checks that indices 0..n-1 are all present; returns the payloads.
  std::vector<size_t> dense(const std::vector<int64_t>& slots, const char* what) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] == kUnset) {
        throw FormatError(std::string("program.fb: graph ") + to_string(graph_.role) + ": " +
                          what + " are not numbered 0.." + std::to_string(slots.size() - 1) +
                          " (index " + std::to_string(i) + " is missing)");
      }
      out.push_back(static_cast<size_t>(slots[i]));
    }
    return out;
  }

  static constexpr int64_t kUnset = INT64_MIN;
  const Program& program_;
  const Graph& graph_;
  const WeightIndex& weights_;
  std::string where_;
};

}  // namespace

WeightIndex index_weights(const Program& program) {
  WeightIndex index;
  for (size_t i = 0; i < program.weights.size(); ++i) {
    if (!index.emplace(program.weights[i].fqn, i).second) {
      throw FormatError("program.fb: weight FQN '" + program.weights[i].fqn + "' appears twice");
    }
  }
  return index;
}

GraphBindings bind_graph(const Program& program, const Graph& graph, const WeightIndex& weights) {
  return Binder(program, graph, weights).run();
}

}  // namespace pt2rt
