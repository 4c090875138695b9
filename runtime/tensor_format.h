// runtime/tensor_format.h — human-readable tensor and value descriptions for error messages.
//
// dtype names follow Python's torch (`torch.float32` → "float32"), so messages read like
// `input 0 (x): expected float32[8, 64] on cpu, got float64[8, 64]`.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt {

/// Python spelling of a dtype: Float → "float32", Long → "int64", Bool → "bool".
std::string dtype_name(c10::ScalarType dtype);

/// "float32[8, 64]" (no device).
std::string describe_tensor_type(c10::ScalarType dtype, c10::IntArrayRef sizes);

/// Expected type of a graph input from its TensorMeta: symbolic dims print as their hint
/// wrapped in the symbol expression's kind, e.g. "float32[s0, 64]".
std::string describe_meta(const TensorMeta& meta, const Program& program);

/// "float32[8, 64] on cpu", "undefined tensor", or for non-tensors a short repr
/// ("int 3", "int[] [1, 2]", "None", "Tensor[] (2 tensors: float32[2] on cpu, ...)").
std::string describe_ivalue(const c10::IValue& value);

/// Renders a SymExpr with Program::symbols names ("s0 * 2").
std::string describe_sym_expr(const SymExpr& expr, const Program& program);

}  // namespace pt2rt
