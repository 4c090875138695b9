// runtime/core/tensor_format.h — human-readable tensor and value descriptions for
// error messages.
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
#include "pt2rt/signature.h"  // dtype_name, meta_string, sym_expr_string

namespace pt2rt {

/// "float32[8, 64]" (no device).
std::string describe_tensor_type(c10::ScalarType dtype, c10::IntArrayRef sizes);

/// "float32[8, 64] on cpu", "undefined tensor", or for non-tensors a short repr
/// ("int 3", "int[] [1, 2]", "None", "Tensor[] (2 tensors: float32[2] on cpu, ...)").
std::string describe_ivalue(const c10::IValue& value);

}  // namespace pt2rt
