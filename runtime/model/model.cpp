// runtime/model/model.cpp — pt2rt::Model, the facade over ModelState (see pt2rt/model.h).
#include "pt2rt/model.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <future>

#include "exec/autograd_function.h"
#include "exec/input_check.h"
#include "model/call_bounds.h"
#include "model/compile_model.h"
#include "model/argument_binding.h"
#include "model/model_impl.h"
#include "pt2rt/archive.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/input_tree.h"
#include "pt2rt/mapped_file.h"
#include "pt2rt/mapped_weights.h"
#include "pt2rt/text.h"
#include "pt2rt/weights.h"

namespace pt2rt {

namespace {

std::shared_ptr<ModelState> load_state(std::shared_ptr<const Archive> archive,
                                       c10::Device device, const LoadOptions& options) {
  std::shared_ptr<const Program> program =
      read_program(*archive, options.archive, BundledExamples::Skip);
  // A mapped archive's weights are views of the mapping on CPU; for another device they are
  // read (from the mapped pages) and copied there.
  std::vector<at::Tensor> weights = archive->mapping() && device.is_cpu()
                                        ? map_weights(archive->mapping(), *archive, *program)
                                        : load_weights(*archive, *program, device);
  auto state =
      compile_model(std::move(program), std::move(weights), device, options, archive->size());
  state->archive = std::move(archive);
  state->archive_limits = options.archive;
  return state;
}

/// Runs `g` without autograd (the caller holds the grad-mode / inference-mode guard).
std::vector<at::Tensor> run_plain(const ModelState& s, const CompiledGraph& g,
                                  const std::vector<at::Tensor>& inputs) {
  std::vector<c10::IValue> out = g.plan->run(bind_inputs(s, g, nullptr, inputs, nullptr, nullptr));
  apply_mutations(s, g, out, inputs);
  std::vector<at::Tensor> result(g.bindings.user_output_values.size());
  for (size_t j = 0; j < g.bindings.outputs.size(); ++j) {
    const OutputBinding& b = g.bindings.outputs[j];
    if (b.sink == OutputSink::UserOutput) result[b.index] = out[j].toTensor();
  }
  return result;
}

}  // namespace

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string& path, c10::Device device, const LoadOptions& options) {
  auto archive = std::make_shared<const Archive>(
      options.map_weights ? Archive::open_mapped(MappedFile::open(path)) : Archive::open(path));
  const bool unchecked = archive->mapping() && device.is_cpu();  // map_weights skipped the CRCs
  auto impl = std::make_unique<Impl>(Impl{load_state(archive, device, options), false, {}});
  if (unchecked && options.check_mapped_weights) {
    // The file read once more through libzip (not the mapping, whose pages training may
    // already have written), entry by entry, off the load's path.
    std::vector<std::string> entries;
    for (const WeightInfo& w : impl->state->program->weights) entries.push_back(w.entry);
    impl->weight_check = std::async(std::launch::async, [path, entries]() -> std::string {
                           try {
                             const Archive file = Archive::open(path);
                             for (const std::string& e : entries) file.check_entry(e);
                             return std::string();
                           } catch (const std::exception& e) {
                             return std::string(e.what()) +
                                    " (LoadOptions::map_weights: the weights mapped at load "
                                    "differ from what was written)";
                           }
                         }).share();
  }
  return Model(std::move(impl));
}

void Model::Impl::require_checked_weights() const {
  if (!weight_check.valid()) return;
  const std::string& problem = weight_check.get();
  if (!problem.empty()) throw FormatError(problem);
}

Model Model::load(const uint8_t* data, size_t size, c10::Device device,
                  const LoadOptions& options) {
  auto archive = std::make_shared<const Archive>(Archive::from_bytes(data, size));
  return Model(std::make_unique<Impl>(Impl{load_state(std::move(archive), device, options), false, {}}));
}

Model Model::from_program(std::shared_ptr<const Program> program, std::vector<at::Tensor> weights,
                          c10::Device device, const LoadOptions& options) {
  if (!program) throw Error("pt2rt::Model::from_program: null program");
  if (weights.size() == program->weights.size()) {
    c10::AutoGradMode no_grad(false);
    for (size_t i = 0; i < weights.size(); ++i) {
      if (!weights[i].defined()) continue;
      at::Tensor t = weights[i].detach().to(device);
      if (t.is_same(weights[i].detach())) t = t.clone();
      if (program->weights[i].kind == WeightKind::Parameter) {
        t.set_requires_grad(program->weights[i].requires_grad);
      }
      weights[i] = t;
    }
  }
  return Model(std::make_unique<Impl>(
      Impl{compile_model(std::move(program), std::move(weights), device, options), false, {}}));
}

std::vector<at::Tensor> Model::forward(const std::vector<at::Tensor>& inputs) const {
  impl_->require_checked_weights();
  const std::shared_ptr<ModelState>& state = impl_->state;
  const ModelState& s = *state;
  if (impl_->training && s.forward && (c10::GradMode::is_enabled() || !s.inference)) {
    const std::vector<int64_t> symbols =
        check_inputs(inputs, *s.program, s.forward->graph(), s.forward->bindings, s.device);
    if (s.call_bounds) s.call_bounds->check(s, symbols, /*training=*/true);  // + backward
    return run_training_forward(state, inputs);
  }
  if (!s.inference) {
    throw Error("pt2rt: the archive has no inference graph (exported with inference=False); "
                "call train() to run its forward graph");
  }
  const std::vector<int64_t> symbols =
      check_inputs(inputs, *s.program, s.inference->graph(), s.inference->bindings, s.device);
  if (s.call_bounds) s.call_bounds->check(s, symbols, /*training=*/false);
  c10::InferenceMode guard;
  if (s.inference_graphs) {
    return s.inference_graphs->call(
        inputs, [&s](const std::vector<at::Tensor>& in) { return run_plain(s, *s.inference, in); });
  }
  return run_plain(s, *s.inference, inputs);
}

namespace {

/// `outputs` named by the signature (positionally past its names).
NamedTensors named_outputs(const Signature& sig, std::vector<at::Tensor> outputs) {
  NamedTensors named;
  named.reserve(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    named.emplace_back(i < sig.outputs.size() ? sig.outputs[i].name : positional_output_name(i),
                       std::move(outputs[i]));
  }
  return named;
}

}  // namespace

NamedTensors Model::forward(const std::vector<at::Tensor>& args, const NamedTensors& kwargs) const {
  const Signature& sig = impl_->state->signature;
  std::vector<std::string> names;
  for (const TensorSpec& in : sig.inputs) names.push_back(in.name);
  return named_outputs(sig, forward(bind_arguments(names, args, kwargs)));
}

NamedTensors Model::call(const std::vector<c10::IValue>& args, const NamedValues& kwargs) const {
  const Signature& sig = impl_->state->signature;
  return named_outputs(sig, forward(flatten_inputs(sig, args, kwargs)));
}


const Signature& Model::signature() const { return impl_->state->signature; }

std::string Model::cuda_graph_report() const {
  const ModelState& s = *impl_->state;
  std::vector<std::string> lines;
  if (s.inference_graphs) lines = s.inference_graphs->report();
  if (s.training_graphs) {
    for (std::string& line : s.training_graphs->report()) lines.push_back(std::move(line));
  }
  if (!s.inference_graphs_refused.empty()) {
    lines.push_back("inference: not captured: " + s.inference_graphs_refused);
  }
  if (!s.training_graphs_refused.empty()) {
    lines.push_back("train: not captured: " + s.training_graphs_refused);
  }
  std::string text;
  for (const std::string& line : lines) text += (text.empty() ? "" : "\n") + line;
  return text;
}

std::vector<at::Tensor> Model::example_inputs(size_t i) const {
  const std::vector<Example> all = examples();
  if (all.empty()) {
    throw InputError("the archive bundles no example (exported with bundle_examples=False)");
  }
  if (i >= all.size()) {
    throw InputError("example " + std::to_string(i) + " requested; the archive bundles " +
                     std::to_string(all.size()) + " (0 to " + std::to_string(all.size() - 1) +
                     ")");
  }
  std::vector<at::Tensor> inputs;
  for (const TensorData& data : all[i].inputs) inputs.push_back(to_tensor(data).to(device()));
  return inputs;
}

void Model::to(c10::Device device) {
  const std::shared_ptr<ModelState> old = impl_->state;
  if (device == old->device) return;  // as torch::nn::Module::to: nothing to move
  if (device.is_cuda() && !at::hasCUDA()) {
    throw InputError("Model::to(" + device.str() + "): this LibTorch has no CUDA");
  }
  std::vector<at::Tensor> weights = old->weights;
  {
    c10::AutoGradMode no_grad(false);
    // torch::nn::Module::to: the same tensors, their data moved (optimizers keep them).
    for (at::Tensor& w : weights) {
      if (w.device() == device) continue;
      at::Tensor grad = w.grad();
      w.set_data(w.to(device));
      if (grad.defined()) w.mutable_grad() = grad.to(device);
    }
  }
  auto state = compile_model(old->program, std::move(weights), device, old->options,
                             old->archive_bytes);
  state->archive = old->archive;
  state->archive_limits = old->archive_limits;
  impl_->state = std::move(state);
}

std::vector<at::Tensor> Model::parameters() const {
  std::vector<at::Tensor> result;
  for (size_t w : impl_->state->parameter_weights) result.push_back(impl_->state->weights[w]);
  return result;
}

NamedTensors Model::named_parameters() const {
  const ModelState& s = *impl_->state;
  NamedTensors result;
  for (size_t w : s.parameter_weights) result.emplace_back(s.program->weights[w].fqn, s.weights[w]);
  return result;
}

NamedTensors Model::named_buffers() const {
  const ModelState& s = *impl_->state;
  NamedTensors result;
  for (size_t w : s.buffer_weights) result.emplace_back(s.program->weights[w].fqn, s.weights[w]);
  return result;
}

void Model::train(bool on) {
  if (on && impl_->state->inference_only) {
    throw Error("pt2rt: the model was loaded with LoadOptions::inference_only: its forward/"
                "backward graphs were not compiled; load it without that option to train");
  }
  if (on && !impl_->state->forward) {
    throw Error("pt2rt: the archive has no forward/backward graphs (exported with "
                "train=False); it can only run in eval mode");
  }
  impl_->training = on;
}

bool Model::is_training() const { return impl_->training; }

c10::Device Model::device() const { return impl_->state->device; }

const Program& Model::program() const { return *impl_->state->program; }

std::vector<Example> Model::examples() const {
  const ModelState& s = *impl_->state;
  if (!s.archive) return s.program->examples;
  return read_examples(*s.archive, s.archive_limits);
}

const ModelState& model_state(const Model& model) { return *model.impl_->state; }

}  // namespace pt2rt
