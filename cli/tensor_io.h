// cli/tensor_io.h — tensor files exchanged with Python, and tensors bundled in archives.
//
// Files given to the CLI (in.pt, out.pt, train.pt, grads.pt) are what Python's
// `torch.save` writes with its default (zip) serialization and `torch.load` reads.
// They are written like `torch::jit::pickle_save` (torch/csrc/jit/serialization/pickle.h) but
// without TorchScript type tags, so torch.load's default weights_only=True (torch >= 2.6)
// reads them, and read like `torch::jit::pickle_load`, with one fix-up for LibTorch 1.13
// (pickle_compat.h).
// Only plain data is accepted (tensors, lists, tuples, dicts): the unpickler builds no
// Python objects. The model archive itself never holds pickles.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "pt2rt/program.h"
#include "pt2rt/signature.h"
#include "pt2rt/weights.h"

namespace pt2rt::cli {

/// Reads a tuple or list of tensors (a single tensor is taken as a list of one).
/// `what` names the file in messages (e.g. "--inputs").
/// @throws UsageError: missing file, not a torch.save file, or another content.
std::vector<at::Tensor> load_tensor_list(const std::string& path, const std::string& what);

/// The user inputs of a call from an --inputs file: a tuple or list of tensors in forward()
/// order (load_tensor_list), or a dict {input name: tensor} holding every input of
/// `signature` by name (`torch.save({"x": x, "mask": m}, "in.pt")`, as
/// `ExportedProgram.module()(**kwargs)` takes them). A model exported with a tuple, list or
/// dict argument (Signature::params, schema 1.6) takes its arguments as forward() did: a
/// tuple or list of them in order, or a dict by parameter name, each value a tensor or the
/// exported structure (`torch.save(([a, b], {"mask": m}), "in.pt")`; pt2rt/input_tree.h).
/// @throws UsageError naming the missing or unknown input (or the path whose structure
///   differs), or as load_tensor_list.
std::vector<at::Tensor> load_inputs(const std::string& path, const std::string& what,
                                    const Signature& signature);

/// Training or evaluation samples: one tensor per model input and the targets, all with the
/// same first (sample) dimension.
struct Dataset {
  std::vector<at::Tensor> inputs;  ///< one per user input of the model, in forward() order
  at::Tensor targets;
  int64_t size() const { return targets.size(0); }
};

/// Reads `(inputs, targets)` (one input) or `((input_0, input_1, ...), targets)` (a model
/// with several inputs; a list works as the inner tuple), tensors with the same first dim.
/// @throws UsageError naming the file and what is wrong.
Dataset load_dataset(const std::string& path, const std::string& what);

/// Writes `tensors` as a Python list (read back by torch.load as list[Tensor]).
/// Tensors are moved to CPU and detached first.
/// @throws UsageError when the file cannot be written.
void save_tensor_list(const std::string& path, const std::vector<at::Tensor>& tensors);

/// Writes an ordered dict name -> tensor (torch.load gives a dict[str, Tensor]).
void save_tensor_dict(const std::string& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors);

/// A tensor bundled in program.fb (examples, references) as a new CPU tensor.
using pt2rt::to_tensor;  // pt2rt/weights.h

/// torch's dtype name without the "torch." prefix: "float32", "int64", "bool".
using pt2rt::dtype_name;  // pt2rt/signature.h

/// "float32[32, 1, 8, 8]" (plus " on cuda:0" when not on CPU and `with_device`).
std::string describe(const at::Tensor& tensor, bool with_device = false);

}  // namespace pt2rt::cli
