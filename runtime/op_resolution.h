// runtime/op_resolution.h — the archive's op table resolved once against the running LibTorch.
//
// Each Program::operators entry becomes a dispatcher OperatorHandle
// (c10::Dispatcher::singleton().findSchema({name, overload})) or one of pt2rt's native ops
// (native_ops.h). Ops the running LibTorch lacks are all collected and reported in one
// OpResolutionError with the torch version that exported them and the one running.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>
#include <vector>

#include "native_ops.h"
#include "pt2rt/program.h"

namespace pt2rt {

/// One resolved op-table entry. Immutable; the schema reference lives as long as the op's
/// registration (the process, for ATen ops and pt2rt's native ops).
struct ResolvedOp {
  std::optional<c10::OperatorHandle> handle;  ///< dispatcher op (absent for native ops)
  const NativeOp* native = nullptr;           ///< pt2rt native op (prim::getitem, sym::*)
  const c10::FunctionSchema& schema() const {
    return native ? native->schema : handle->schema();
  }
};

/// The version of the LibTorch pt2rt runs on ("1.13.0").
std::string running_torch_version();

/// Resolves every entry of `program.operators`, in order.
/// @throws OpResolutionError listing every unknown op as `aten::name.overload` with the
///   schema seen at export, plus Program::producer's torch version and the running one.
std::vector<ResolvedOp> resolve_operators(const Program& program);

}  // namespace pt2rt
