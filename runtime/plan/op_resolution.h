// runtime/plan/op_resolution.h — the archive's op table resolved once against the
// running LibTorch, and the one report of everything in the archive that the running LibTorch
// lacks.
//
// Each Program::operators entry becomes a dispatcher OperatorHandle
// (c10::Dispatcher::singleton().findSchema({name, overload})) or one of pt2rt's native ops
// (native_ops.h). An archive made by another torch version may name operators or overloads the
// running LibTorch does not have, or call one with arguments its schema does not take. All of
// these — every operator, overload and argument — are collected (ResolutionReport) over the
// whole program and reported in ONE OpResolutionError naming the torch version that exported
// the archive and the one running. Every dispatcher op must also pass pt2rt's operator policy
// (op_policy.h) unless the caller allowed it by name; refused ops go into the same error, each
// with the rule it breaks. Archive text in the message is escaped (pt2rt/text.h). Trailing arguments the archive omits are not mismatches:
// they take the running schema's defaults (argument_conversion.h).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/native_ops.h"
#include "pt2rt/program.h"

namespace pt2rt {

/// One resolved op-table entry. Immutable; the schema reference lives as long as the op's
/// registration (the process, for ATen ops and pt2rt's native ops).
struct ResolvedOp {
  std::optional<c10::OperatorHandle> handle;  ///< dispatcher op (absent for native ops)
  const NativeOp* native = nullptr;           ///< pt2rt native op (prim::getitem, sym::*)
  /// The archive recorded a schema string for this op and the running one prints differently:
  /// the archive comes from another torch version, so an argument that does not fit is a
  /// version difference (reported in the OpResolutionError), not a damaged archive.
  bool schema_differs = false;
  bool resolved() const { return native != nullptr || handle.has_value(); }
  const c10::FunctionSchema& schema() const {
    return native ? native->schema : handle->schema();
  }
};

/// Collects what the running LibTorch lacks; see the file comment. Not thread-safe (one per
/// load).
class ResolutionReport {
 public:
  /// Operator `op` (name + overload) is not registered in the running LibTorch.
  void missing_operator(const Operator& op);
  /// Operator `op` exists but pt2rt's operator policy refuses it; `why` names the rule.
  void refused_operator(const Operator& op, std::string why);
  /// A node of operator `op` passes `argument` in a way the running schema does not take
  /// (`problem`: "is not in the running schema", "is missing and has no default", ...);
  /// `argument` empty: the node's outputs do not match the schema's returns.
  /// `where` names the node (NodeContext::describe); repeated problems are counted once.
  void mismatch(const Operator& op, const std::string& argument, const std::string& problem,
                const std::string& where);
  bool empty() const { return missing_.empty() && refused_.empty() && mismatches_.empty(); }
  /// @throws OpResolutionError listing everything recorded, with the archive's torch version
  ///   (Program::producer) and the running one; does nothing when empty().
  void throw_if_any(const Program& program) const;

 private:
  struct Seen {
    std::string schema, where;
    size_t count = 0;
  };
  std::vector<const Operator*> missing_;
  std::vector<std::pair<const Operator*, std::string>> refused_;
  std::map<std::tuple<std::string, std::string, std::string>, Seen> mismatches_;
};

/// The version of the LibTorch pt2rt runs on ("1.13.0").
std::string running_torch_version();

/// Resolves every entry of `program.operators`, in order.
/// @param allow_operators  LoadOptions::allow_operators: ops exempt from the policy.
/// @param report  when given, unknown and refused operators are recorded there (their entries
///   stay unresolved) for the caller to throw once the whole program was checked; without,
///   they are thrown at once.
/// @throws OpResolutionError (no report) listing every refused op (`aten::from_file: maps or
///   reads a file ...`) and every unknown op as `aten::name.overload` with the schema seen at
///   export, plus Program::producer's torch version and the running one.
std::vector<ResolvedOp> resolve_operators(const Program& program,
                                          const std::vector<std::string>& allow_operators = {},
                                          ResolutionReport* report = nullptr);

}  // namespace pt2rt
