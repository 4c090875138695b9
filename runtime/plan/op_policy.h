// runtime/plan/op_policy.h — which operators an archive may call (pt2rt's operator
// policy).
//
// An archive's op table is untrusted: c10::Dispatcher would resolve any registered operator,
// including ones that read or write files (aten::from_file), talk to other processes (c10d::),
// print, or mutate their arguments. pt2rt runs only what a pt2rt exporter can emit — functional
// ATen operators (graphs are functionalized; mutations of inputs are InputMutation outputs,
// never in-place nodes) and pt2rt's own prim::/sym:: ops — and decides it at load, from each
// operator's schema (c10::FunctionSchema) and tags, not from a list of allowed names:
//
//   1. explicitly denied ops (kDenied in op_policy.cpp: functional by schema, yet they read
//      files, write into an argument their schema does not mark, or skip the checks that keep
//      a kernel inside its memory; and ATen's test operators aten::_test_*);
//   2. the namespace is `aten` (custom ops, c10d collectives, profiler, quantized, prims ...
//      are refused unless the caller allows them);
//   3. no argument carries a write alias annotation (`Tensor(a!)`: in-place and out= ops) —
//      except optional ones (`Tensor(a!)? running_mean`), which every node must leave None
//      (batch norm: or run in eval mode, where the stats are only read), checked at load by
//      meta_check.cpp;
//   4. it returns something (an op returning nothing can act only through side effects) —
//      except the size checks torch.export emits (_assert_scalar, sym_constrain_range, ...),
//      which only raise an error;
//   5. no `dynamic_output_shape` tag (output sizes that depend on tensor data cannot be
//      declared by a static program, nor bounded at load) — except aten::index.Tensor, whose
//      size depends on data only for boolean masks, which the load-time meta check refuses;
//   6. every return is a value an archive can describe (tensors, lists of tensors, numbers);
//   7. every argument has a type an archive can carry (no Storage, Stream, Dimname, custom
//      class, Dict ...; a Generator only as an optional argument left at its default);
//   8. a `str` argument is one of ATen's mode selectors (kModeSelectors: `approximate`,
//      `rounding_mode`, `equation`, ...) or an assert's message — never a file name, path or
//      free text a kernel interprets.
//
// schema/README.md ("Operator policy") documents the rules and the counts they give on
// LibTorch 1.13 and 2.x; tests/cpp/policy/op_policy_report.cpp enumerates the dispatcher and
// checks them.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/function_schema.h>

#include <string>
#include <vector>

namespace pt2rt {

/// The policy's decision on one operator.
struct OpVerdict {
  bool allowed = false;
  std::string rule;    ///< short rule id: "denied", "namespace", "mutates", "no-return",
                       ///< "dynamic-shape", "return-type", "argument-type", "str-argument"
  std::string reason;  ///< readable, e.g. "writes to its argument 'self' (in-place / out=)"
};

/// Classifies one ATen/custom operator by pt2rt's policy (rules 1–8 above). pt2rt's native
/// ops (native_ops.h) are not dispatcher ops and are always allowed.
OpVerdict classify_operator(const c10::OperatorHandle& op);
/// The same from a schema alone (`dynamic_output_shape`: whether the op has that tag).
OpVerdict classify_schema(const c10::FunctionSchema& schema, bool dynamic_output_shape);

/// True when `allow` (LoadOptions::allow_operators) names `op`: "ns::name" matches every
/// overload, "ns::name.overload" one.
bool explicitly_allowed(const c10::OperatorName& op, const std::vector<std::string>& allow);

/// The `str` argument names the policy accepts (ATen's mode selectors), sorted.
const std::vector<std::string>& mode_selector_names();
/// The explicitly denied operators, "aten::name" (every overload), with why.
const std::vector<std::pair<std::string, std::string>>& denied_operators();

}  // namespace pt2rt
