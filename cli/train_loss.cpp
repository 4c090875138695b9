// cli/train_loss.cpp — output selection, loss functions and their checks for `train`.
#include "train_loss.h"

#include <ATen/ATen.h>
#include <c10/util/irange.h>

#include <functional>
#include <sstream>

#include "cli.h"
#include "signature.h"

namespace pt2rt::cli {
namespace {

std::string output_label(const UserValue& v, const Program& program) {
  std::ostringstream out;
  out << "output " << v.index << " " << v.output_name;
  if (!v.name.empty()) out << " (" << v.name << ")";
  out << " " << (v.meta ? meta_string(*v.meta, program) : std::string("(not a tensor)"));
  return out.str();
}

std::string list_outputs(const std::vector<UserValue>& outputs, const Program& program) {
  std::string text;
  for (const auto& o : outputs) text += (text.empty() ? "" : ", ") + output_label(o, program);
  return text;
}

/// A one-level output name without its brackets and quotes: "['logits']" and "[\"logits\"]"
/// -> "logits", "[1]" -> "1", ".field" -> "field"; anything else (a nested path, a bare
/// word) unchanged.
std::string bare_name(const std::string& name) {
  const auto inner_has = [&](size_t from, size_t to, const char* chars) {
    return name.substr(from, to - from).find_first_of(chars) != std::string::npos;
  };
  const size_t n = name.size();
  for (const char quote : {'\'', '"'}) {
    if (n >= 4 && name[0] == '[' && name[1] == quote && name[n - 2] == quote &&
        name[n - 1] == ']' && !inner_has(2, n - 2, quote == '"' ? "\"" : "'")) {
      return name.substr(2, n - 4);
    }
  }
  if (n >= 3 && name[0] == '[' && name[n - 1] == ']' &&
      name.find_first_not_of("0123456789", 1) == n - 1) {
    return name.substr(1, n - 2);
  }
  if (n >= 2 && name[0] == '.' && !inner_has(1, n, ".[]")) return name.substr(1);
  return name;
}

/// The output `spec` names, trying in turn: its index, its stored name as written
/// ("['logits']"), the stored name without brackets and quotes ("logits"), the graph value's
/// name (inspect's "(mul)"). The first of these that some output matches decides; two outputs
/// matching it is an error.
size_t find_output(const std::vector<UserValue>& outputs, const std::string& spec,
                   const Program& program) {
  const std::vector<std::function<bool(const UserValue&)>> ways = {
      [&](const UserValue& o) { return std::to_string(o.index) == spec; },
      [&](const UserValue& o) { return o.output_name == spec; },
      [&](const UserValue& o) { return bare_name(o.output_name) == bare_name(spec); },
      [&](const UserValue& o) { return !o.name.empty() && o.name == spec; },
  };
  for (const auto& matches : ways) {
    std::vector<size_t> found;
    for (const auto i : c10::irange(outputs.size())) {
      if (matches(outputs[i])) found.push_back(i);
    }
    if (found.size() == 1) return found[0];
    if (found.size() > 1) {
      throw UsageError("--output " + spec + " could be " +
                       output_label(outputs[found[0]], program) + " or " +
                       output_label(outputs[found[1]], program) +
                       "; give the index or the name as inspect lists it");
    }
  }
  throw UsageError("--output " + spec +
                   " names no output of the model (give an index or an output name as "
                   "`export-cli inspect` lists it); its outputs: " +
                   list_outputs(outputs, program));
}

/// Dim `d` of the output is known to differ from `size`.
bool differs(const Dim& d, int64_t size) { return d.is_static() && d.value != size; }

/// The one-line refusal: "--loss mse cannot use output 1 [1] (argmax) int64[4]: <why>".
[[noreturn]] void refuse(const std::string& loss, const std::string& label, const std::string& why,
                         bool several_outputs) {
  throw UsageError("--loss " + loss + " cannot use " + label + ": " + why +
                   (several_outputs ? " (choose another with --output NAME|INDEX)" : ""));
}

}  // namespace

void check_loss_kind(const std::string& loss) {
  if (loss != "cross_entropy" && loss != "mse" && loss != "output") {
    throw UsageError("--loss must be cross_entropy, mse or output, got '" + loss + "'");
  }
}

LossSpec choose_loss(const Program& program, const std::string& loss,
                     const std::optional<std::string>& output, const Dataset& data,
                     int64_t batch) {
  check_loss_kind(loss);
  const Graph* graph = program.graph(GraphRole::Forward);
  if (graph == nullptr) throw UsageError("the archive has no forward graph");
  const auto inputs = user_inputs(*graph);
  const size_t wanted = data.inputs.size() + (loss == "output" ? 1 : 0);
  if (inputs.size() != wanted) {
    std::string names;
    for (const auto& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
    throw UsageError(
        "--data holds " + std::to_string(data.inputs.size()) + " input tensor(s)" +
        (loss == "output" ? " plus the targets (--loss output passes them as the last input)"
                          : "") +
        ", the model takes " + std::to_string(inputs.size()) + " (" + names + ")" +
        (inputs.size() > 1 ? "; write the inputs as a tuple: ((input_0, input_1, ...), targets)"
                           : ""));
  }
  const auto outputs = user_outputs(program, *graph);
  if (outputs.empty()) throw UsageError("the model has no user outputs to train on");
  LossSpec spec;
  spec.kind = loss;
  spec.output = output ? find_output(outputs, *output, program) : 0;
  const UserValue& chosen = outputs[spec.output];
  spec.label = output_label(chosen, program);
  const bool several = outputs.size() > 1;
  const TensorMeta* meta = chosen.meta;
  if (meta == nullptr) refuse(loss, spec.label, "it is not a tensor", several);
  if (!c10::isFloatingType(meta->dtype)) {
    refuse(loss, spec.label, "the loss needs floating-point values", several);
  }
  const auto& sizes = meta->sizes;
  if (loss == "output") {
    for (const auto& d : sizes) {
      if (!d.is_static() || d.value != 1) {
        refuse(loss, spec.label, "a loss computed in forward must be a scalar", several);
      }
    }
    return spec;
  }
  if (sizes.empty() || differs(sizes[0], batch)) {
    refuse(loss, spec.label,
           "its dimension 0 is not the batch (" + std::to_string(batch) + " samples per step)",
           several);
  }
  const at::Tensor& t = data.targets;
  const bool class_targets = loss == "cross_entropy" && t.scalar_type() == at::kLong;
  const size_t rank = static_cast<size_t>(t.dim()) + (class_targets ? 1 : 0);
  bool match = sizes.size() == rank;
  for (size_t i = 1; match && i < static_cast<size_t>(t.dim()); ++i) {
    match = !differs(sizes[i + (class_targets ? 1 : 0)], t.size(static_cast<int64_t>(i)));
  }
  if (!match) {
    std::ostringstream why;
    why << "the targets " << describe(t) << " need "
        << (class_targets ? "an output [N, C" : "an output [N") << (t.dim() > 1 ? ", " : "");
    for (int64_t i = 1; i < t.dim(); ++i) why << (i > 1 ? ", " : "") << t.size(i);
    if (class_targets) {
      why << "] (int64 class indices; class scores in dim 1)";
    } else {
      why << "] of their shape (" << loss << " compares element-wise, no broadcasting"
          << (loss == "cross_entropy"
                  ? "; float targets are class probabilities, class indices are int64)"
                  : ")");
    }
    refuse(loss, spec.label, why.str(), several);
  }
  if (class_targets && sizes.size() >= 2 && sizes[1].is_static() && t.numel() > 0) {
    const int64_t most = t.max().item<int64_t>();
    if (most >= sizes[1].value) {
      refuse(loss, spec.label,
             "the targets hold class index " + std::to_string(most) + ", but it has " +
                 std::to_string(sizes[1].value) + " classes (indices 0 to " +
                 std::to_string(sizes[1].value - 1) + ")",
             several);
    }
  }
  return spec;
}

std::vector<at::Tensor> model_inputs(const LossSpec& spec, const Dataset& data,
                                     const at::Tensor& idx, c10::Device device) {
  std::vector<at::Tensor> inputs;
  for (const auto& x : data.inputs) inputs.push_back(x.index_select(0, idx).to(device));
  if (spec.kind == "output") inputs.push_back(data.targets.index_select(0, idx).to(device));
  return inputs;
}

at::Tensor compute_loss(const LossSpec& spec, const std::vector<at::Tensor>& outputs,
                        const at::Tensor& targets, int64_t reduction) {
  const at::Tensor& out = outputs.at(spec.output);
  if (spec.kind == "output") return out.reshape({});
  if (spec.kind == "mse") return at::mse_loss(out, targets.to(out.scalar_type()), reduction);
  return at::cross_entropy_loss(out, targets, {}, reduction);
}

void check_targets(const std::string& loss, const at::Tensor& targets, const std::string& what) {
  if (loss == "output") return;  // the model's own input: its signature checks it
  if (loss == "cross_entropy") {
    if (targets.scalar_type() == at::kLong) {
      if (targets.numel() > 0 && targets.min().item<int64_t>() < 0) {
        throw UsageError(what + ": cross_entropy class targets must be >= 0");
      }
    } else if (!targets.is_floating_point()) {
      throw UsageError(what +
                       ": cross_entropy targets must be int64 class indices or float "
                       "probabilities, got " +
                       describe(targets));
    }
  } else if (!targets.is_floating_point()) {
    throw UsageError(what + ": mse targets must be floating point, got " + describe(targets));
  }
}

}  // namespace pt2rt::cli
