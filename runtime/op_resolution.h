// runtime/op_resolution.h — the archive's op table resolved once against the running LibTorch.
//
// Each Program::operators entry becomes a dispatcher OperatorHandle
// (c10::Dispatcher::singleton().findSchema({name, overload})) or one of pt2rt's native ops
// (native_ops.h). Every dispatcher op must pass pt2rt's operator policy (op_policy.h) unless
// the caller allowed it by name. Ops the policy refuses and ops the running LibTorch lacks are
// all collected and reported in one OpResolutionError: each refused op with the rule it breaks,
// each missing one with the torch version that exported it and the one running.
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
/// @param allow_operators  LoadOptions::allow_operators: ops exempt from the policy.
/// @throws OpResolutionError listing every refused op (`aten::from_file: maps or reads a
///   file ...`) and every unknown op as `aten::name.overload` with the schema seen at export,
///   plus Program::producer's torch version and the running one. Archive text in the message
///   is escaped (pt2rt/text.h).
std::vector<ResolvedOp> resolve_operators(const Program& program,
                                          const std::vector<std::string>& allow_operators = {});

}  // namespace pt2rt
