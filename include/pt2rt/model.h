// pt2rt/model.h — a loaded model.pt2 as a differentiable callable.
//
// The C++ counterpart of AOTAutograd's aot_compile_joint_with_descriptors:
//   * training mode (is_training() and grad mode enabled): forward() runs one
//     torch::autograd::Function whose forward executes the forward graph and whose
//     backward executes the backward graph (PyTorch docs, "Extending torch.func with autograd.Function");
//     parameters are leaf tensors, so `loss.backward()` fills `.grad()` and any
//     torch::optim optimizer works on parameters(). Mutated buffers (InputMutation
//     outputs, e.g. BatchNorm running_mean/running_var/num_batches_tracked) are copied
//     back into the buffers after the forward graph runs.
//   * eval mode or grad disabled: the inference graph under c10::InferenceMode.
//
// Mode after load: eval (is_training() == false), so a loaded model runs inference until
// train() is called — unlike a freshly built nn.Module, which starts in training mode.
// In eval mode (or with grad disabled) outputs are inference tensors (c10::InferenceMode):
// they cannot take part in autograd later.
//
// Threading: the loaded plans are immutable; per-call state lives in a frame, so
// concurrent inference calls on one Model are safe. Training calls mutate parameters'
// .grad() and buffers and must be serialized by the caller, as in LibTorch.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pt2rt/input_tree.h"
#include "pt2rt/load_options.h"
#include "pt2rt/program.h"
#include "pt2rt/signature.h"

namespace pt2rt {

class Archive;
struct ModelState;  // runtime-internal

/// Name/tensor pairs, in order: the keyword inputs of Model::forward(args, kwargs) and its
/// named outputs (as named_parameters()).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class Model {
 public:
  /// Loads `path` and places its weights on `device` (CPU or CUDA). Resolves every op
  /// through c10::Dispatcher once, under pt2rt's operator policy, builds the execution plans
  /// and checks every graph on the meta device against `options.run` (pt2rt/load_options.h;
  /// the defaults are the untrusted-archive policy: docs/security.md "Running an untrusted archive").
  /// @throws FormatError (archive/program invalid, a declared shape the kernels contradict, a
  ///   graph over its run bounds), OpResolutionError (ops the policy refuses and ops this
  ///   LibTorch lacks, all listed at once).
  static Model load(const std::string& path, c10::Device device = c10::kCPU,
                    const LoadOptions& options = {});
  /// Same, from an archive in memory; the bytes are copied.
  static Model load(const uint8_t* data, size_t size, c10::Device device = c10::kCPU,
                    const LoadOptions& options = {});
  /// Builds a model from an already decoded program and its weights (Program::weights
  /// order; moved to `device`, parameters made leaves with the recorded requires_grad).
  /// For tools and tests; such a model has no source archive, so save() throws. The operator
  /// policy and the meta-device checks apply as for load (size-relative run bounds at their
  /// floor values).
  /// @throws FormatError (weights do not match the program, bad descriptors/arguments),
  ///   OpResolutionError.
  static Model from_program(std::shared_ptr<const Program> program,
                            std::vector<at::Tensor> weights, c10::Device device = c10::kCPU,
                            const LoadOptions& options = {});

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  /// Runs the model on user inputs (in the order of the Plain input descriptors).
  /// Returns the user outputs (Plain output descriptors) in order. Integer/bool outputs
  /// are never differentiable.
  /// @throws InputError: wrong count, dtype, rank, size or device, naming the input as
  ///   `input 0 (x): expected float32[8, 64] on cpu, got float64[8, 64]`.
  /// @throws ExecutionError: a kernel failed (node, op, argument metas, export stack trace).
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& inputs) const;

  /// Runs the model on inputs given like the original Python `forward`: `args` positionally
  /// (the first inputs, in forward() order), `kwargs` by forward()'s parameter names — as
  /// TorchScript's `Module::forward(std::vector<IValue>, const Kwargs&)`
  /// (torch/csrc/api/include/torch/jit.h; https://pytorch.org/cppdocs/) and torch.export's
  /// `ExportedProgram.module()(*args, **kwargs)`. signature().inputs gives the names.
  /// Returns every user output with its name (signature().outputs: `['logits']`, `[1]`,
  /// `output`; forward()'s dict keys and tuple positions kept), in output order.
  /// Example: `m.forward({x}, {{"mask", mask}})`, or all by name: `m.forward({}, {{"x", x},
  /// {"mask", mask}})`.
  /// @throws InputError listing every unknown name, name given twice (also positionally),
  ///   and missing input, with the names the model takes; then as forward(inputs).
  /// @throws ExecutionError as forward(inputs).
  NamedTensors forward(const std::vector<at::Tensor>& args, const NamedTensors& kwargs) const;

  /// Runs the model on inputs given as forward() took them at export — each parameter a
  /// tensor, or the tuple / list / str-keyed dict of tensors (nested) it was exported with
  /// (schema 1.6; torch.export's `in_spec`, `ExportedProgram.module()`'s call): `args`
  /// positionally, `kwargs` by forward()'s parameter names, flattened by
  /// pt2rt/input_tree.h's flatten_inputs. Example: a `forward(self, images, batch)` exported
  /// with a list of two tensors and a dict: `m.call({c10::List<at::Tensor>({a, b})},
  /// {{"batch", dict}})`. Outputs as forward(args, kwargs).
  /// @throws InputError as flatten_inputs (naming the path, e.g. `images[1]`), then as
  ///   forward(inputs). @throws ExecutionError as forward(inputs).
  NamedTensors call(const std::vector<c10::IValue>& args, const NamedValues& kwargs) const;

  /// The user inputs and outputs: names, dtypes, shapes with symbolic dims and their ranges
  /// (pt2rt/signature.h; ExecuTorch's `Module::method_meta("forward")`). Computed at load;
  /// the reference stays valid as long as the Model (to() keeps it).
  const Signature& signature() const;

  /// What LoadOptions::cuda_graphs did, one line per input-shape key seen: inference calls
  /// "<dtypes, sizes, strides>: warm-up N", "...: captured, R replays" or
  /// "...: refused: <why the capture failed>" (runtime/exec/inference_graphs.h); training
  /// calls "train plan <id> <key>: forward <status>; backward <grad-outputs key>: <status>"
  /// (runtime/exec/training_graphs.h); "inference: not captured: <why>" / "train: not
  /// captured: <why>" for graphs that cannot be replayed (they write a user input). Empty without
  /// cuda_graphs or off CUDA.
  std::string cuda_graph_report() const;

  /// The inputs of bundled example `i` (pt2rt.export's `bundle_examples`, the BundledProgram
  /// analogue) as new tensors on device(), in forward() order: `m.forward(m.example_inputs())`
  /// runs the example the archive was verified with. Reads the examples from the archive.
  /// @throws InputError when the archive bundles no example or `i` is out of range (both
  ///   counts named). @throws FormatError as examples().
  std::vector<at::Tensor> example_inputs(size_t i = 0) const;

  /// Moves every parameter and buffer to `device` without reading the archive again, as
  /// LibTorch's `torch::nn::Module::to(device)`: each weight keeps its identity (Tensor::
  /// set_data), so optimizers built on parameters() keep working; existing `.grad()`s move
  /// too. The plans are rebuilt for `device` (device arguments retargeted, meta-device checks
  /// rerun). Not to be called while a backward through this model is pending.
  /// @throws InputError when `device` is CUDA and this LibTorch has no CUDA; FormatError /
  ///   OpResolutionError as load (the plans are checked again).
  void to(c10::Device device);

  /// Parameters in the export's named_parameters() order (all of them, frozen ones with
  /// requires_grad=false included), as shared leaf tensors: optimizers update them in place.
  std::vector<at::Tensor> parameters() const;
  NamedTensors named_parameters() const;
  NamedTensors named_buffers() const;

  /// Switches between training (forward/backward graphs) and eval (inference graph).
  /// @throws Error when `on` and the archive has no forward graph (exported with train=False).
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const;

  c10::Device device() const;
  /// The decoded program. Its bundled examples are not decoded at load (Program::examples is
  /// empty for a loaded model): they are read when asked for, through examples().
  const Program& program() const;
  /// The bundled examples (inputs and eager references), decoded from the source archive on
  /// each call and owned by the caller — nothing of them stays resident with the model.
  /// For a model made by from_program: a copy of its program's examples.
  /// @throws FormatError as load (the archive is read and checked again).
  std::vector<Example> examples() const;

  /// Writes the current parameter and buffer values into a copy of the source archive at
  /// `path`: temp file in the same directory, fsync, rename. The file's permissions are the
  /// replaced file's, or 0666 & ~umask for a new one (as the Python exporter's save). Bundled
  /// example inputs are kept; their references are dropped (they belong to the old weights),
  /// and so is a training state (optimizer/*; pt2rt/training_state.h saves a new one).
  /// @throws Error when the file cannot be written; the target is then left unchanged.
  void save(const std::string& path) const;

 private:
  struct Impl;
  friend const ModelState& model_state(const Model& model);  // runtime/model/model_impl.h
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pt2rt
