// runtime/plan/reinplace.h — running an out-of-place elementwise op in place on a dead
// input.
//
// Functionalized graphs (AOTAutograd, make_fx + functionalize) have no in-place ops: a
// model's `relu(inplace=True)` or `out += identity` is captured as `relu` / `add.Tensor`,
// and every such node allocates a fresh result although its input is never read again.
// Eager PyTorch and TorchScript run the user's in-place op instead (for a ReLU on an
// 8×64×32×32 float32 activation: 22 µs in place vs 47 µs out of place, LibTorch 1.13, one
// thread). The plan marks each instruction whose op has an in-place twin (below) and whose
// `self` slot dies at that instruction (its last read); at run time the twin runs when the
// tensor in that slot is provably not observable by anything else (`can_run_in_place`), so
// the result is the one the out-of-place op computes, bit for bit, in the same layout. This
// is the re-inplacing of torch.fx.passes.reinplace / Inductor, decided per call from
// reference counts instead of at export from alias analysis.
//
// Ops and their twins (same schema arguments):
//   relu, hardtanh, silu, hardswish, sigmoid, tanh   -> <op>_   (unary)
//   add.Tensor, sub.Tensor, mul.Tensor, div.Tensor   -> <op>_.Tensor   (binary)
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace pt2rt {

/// An op's in-place twin and what the run-time check must verify.
struct InplaceTwin {
  c10::OperatorHandle op;
  bool binary = false;        ///< argument 1 is a tensor that must match `self`
  bool floating_only = false; ///< out of place, an integral `self` would give a float result
};

/// The in-place twin of `op` from the table above, when this LibTorch has it.
std::optional<InplaceTwin> inplace_twin(const c10::OperatorHandle& op);

/// Whether the twin may run on the tensors in `self` and (binary) `other`, the op's first two
/// arguments as read from their slots, without changing anything observable:
///   * `self` is a strided, contiguous, defined tensor held only by its slot (TensorImpl
///     reference count 1, storage reference count 1: no other tensor, view or cache sees it),
///     not requiring grad, with grad mode off (no autograd graph records the call), and not
///     an inference tensor outside inference mode;
///   * unary ops marked floating_only: `self` is floating point;
///   * binary: `other` is a tensor of `self`'s dtype, either 0-dimensional or of `self`'s
///     sizes and strides (so the out-of-place result would have `self`'s dtype, sizes and
///     strides), and `self` is floating point (no integer division semantics to mirror).
bool can_run_in_place(const InplaceTwin& twin, const c10::IValue& self, const c10::IValue* other);

}  // namespace pt2rt
