// runtime/core/result_check.h — is a node's result what the archive declared, and a
// sound tensor?
//
// Used on the meta device at load (meta_check.h, every node) and after real runs of the
// instructions that need it (Instruction::checks). A tensor result must be strided (not
// sparse, mkldnn or quantized) and lie inside its storage: storage_offset + the largest
// element offset, times the element size, within the storage's bytes (checked arithmetic) —
// which catches views made without bounds checks (LibTorch 1.13's aten::_reshape_alias).
#pragma once

#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

#include "pt2rt/program.h"

namespace pt2rt {

/// Where a result is checked.
enum class CheckAt {
  Load,  ///< the meta run: symbolic dims are compared with their values at the run's symbols
  Run,   ///< after a real call of an op the meta run could not verify: symbolic dims are not
         ///< compared, and a Tensor value that declares no meta must be undefined (the
         ///< exporter records no meta exactly for results that were None, e.g. the gradients
         ///< convolution_backward's output_mask leaves out)
};

/// "" when `result` is sound and, for a Tensor value with a declared meta, has its dtype and
/// sizes; else what is wrong ("is float32[4, 11], the archive declares float32[4, 10]").
/// `symbols` (Load): the symbol values of the meta run (sym_eval.h); null: the hints.
/// A value marked `device_dependent_shape` (schema 1.5: its shape differs by device, e.g.
/// eval-mode BatchNorm's saved statistics, [0] on the CPU and [C] on CUDA) is checked by its
/// dtype and by its element count, at most the declared one or `largest_argument` (the most
/// elements of any tensor argument of the node), not by the exporting device's sizes.
std::string check_result(const Value& value, const c10::IValue& result, CheckAt at,
                         const std::vector<int64_t>* symbols = nullptr,
                         int64_t largest_argument = 0);

/// The most elements of any tensor (or tensor-list element) in `args`; 0 when none.
int64_t largest_tensor_numel(const std::vector<c10::IValue>& args);

/// "" when every tensor in `result` (a tensor or a list of tensors) is strided and inside its
/// storage; else what is wrong.
std::string check_storage(const c10::IValue& result);

}  // namespace pt2rt
