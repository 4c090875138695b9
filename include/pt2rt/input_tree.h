// pt2rt/input_tree.h — a call's inputs given as forward() took them at export: each parameter
// a tensor, or a tuple, list or str-keyed dict of tensors (nested), flattened into the user
// inputs Plain(0), Plain(1), ... (torch.export's `in_spec` and `ExportedProgram.module()`,
// https://pytorch.org/docs/stable/export.html; schema 1.6 `InputParam` / `InputSpec`).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "pt2rt/signature.h"

namespace c10 {
struct IValue;  // ATen/core/ivalue.h: include it to build the values
}  // namespace c10

namespace pt2rt {

/// Keyword inputs by forward()'s parameter names, in order.
using NamedValues = std::vector<std::pair<std::string, c10::IValue>>;

/// The user inputs (one tensor each, Plain order) of a call with `args` bound to
/// `signature.params` in order and `kwargs` by name, each value matched against its
/// parameter's structure: a Tensor spec takes a tensor; a Tuple or List spec a c10 tuple or
/// list (either) of that length; a Dict spec a dict with string keys, exactly the exported
/// ones (any order). Tensors are returned as given (no copy, no check of dtype or sizes:
/// Model::forward checks those).
/// @throws InputError naming the path where the value differs (`images[1]: expected a tensor,
///   got a list`), or unknown, repeated and missing parameter names.
std::vector<at::Tensor> flatten_inputs(const Signature& signature,
                                       const std::vector<c10::IValue>& args,
                                       const NamedValues& kwargs);

/// Whether a parameter of `params` is not a single tensor (a tuple, list or dict).
bool has_structured_inputs(const std::vector<InputParam>& params);

/// `spec` as text: "Tensor", "list[Tensor, Tensor]", "dict['image': Tensor, 'mask': Tensor]".
std::string input_spec_string(const InputSpec& spec);

}  // namespace pt2rt
