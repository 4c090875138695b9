// runtime/op_resolution.cpp — see op_resolution.h.
#include "op_resolution.h"

#include <torch/csrc/api/include/torch/version.h>

#include <sstream>

#include "op_policy.h"
#include "pt2rt/errors.h"
#include "pt2rt/text.h"

namespace pt2rt {

std::string running_torch_version() { return TORCH_VERSION; }

std::vector<ResolvedOp> resolve_operators(const Program& program,
                                          const std::vector<std::string>& allow_operators) {
  std::vector<ResolvedOp> resolved(program.operators.size());
  std::vector<const Operator*> unknown;
  std::vector<std::pair<const Operator*, std::string>> refused;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (size_t i = 0; i < program.operators.size(); ++i) {
    const Operator& op = program.operators[i];
    if (const NativeOp* native = find_native_op(op.name, op.overload)) {
      resolved[i].native = native;
      continue;
    }
    // findSchema (not findSchemaOrThrow): we collect every miss before throwing.
    const c10::OperatorName name(op.name, op.overload);
    auto handle = dispatcher.findSchema(name);
    if (!handle.has_value()) {
      unknown.push_back(&op);
      continue;
    }
    if (!explicitly_allowed(name, allow_operators)) {
      const OpVerdict verdict = classify_operator(*handle);
      if (!verdict.allowed) {
        refused.emplace_back(&op, verdict.reason);
        continue;
      }
    }
    resolved[i].handle = *handle;
  }
  if (unknown.empty() && refused.empty()) return resolved;

  // First line: every op by name (export-cli shows only it without --verbose); then one
  // line per op with the rule that refuses it or the schema it had at export.
  auto names = [](const auto& ops, auto get) {
    std::string out;
    for (size_t i = 0; i < ops.size() && i < 8; ++i) out += (i ? ", " : "") + escaped(get(ops[i]).qualified(), 128);
    if (ops.size() > 8) out += ", ... (" + std::to_string(ops.size() - 8) + " more)";
    return out;
  };
  std::ostringstream os;
  if (!refused.empty()) {
    os << refused.size() << " operator" << (refused.size() == 1 ? " is" : "s are")
       << " refused by pt2rt's operator policy: "
       << names(refused, [](const auto& r) -> const Operator& { return *r.first; });
  }
  if (!unknown.empty()) {
    if (!refused.empty()) os << "; ";
    os << unknown.size() << " operator" << (unknown.size() == 1 ? " is" : "s are")
       << " not available in the running LibTorch (archive exported with torch "
       << (program.producer.torch_version.empty() ? "<unknown>"
                                                  : escaped(program.producer.torch_version, 64))
       << ", running torch " << running_torch_version()
       << "): " << names(unknown, [](const Operator* o) -> const Operator& { return *o; });
  }
  for (const auto& [op, why] : refused) os << "\n  " << escaped(op->qualified(), 128) << ": " << why;
  for (const Operator* op : unknown) {
    os << "\n  " << escaped(op->qualified(), 128);
    if (!op->schema.empty()) os << "    (schema at export: " << escaped(op->schema, 512) << ")";
  }
  if (!refused.empty()) {
    os << "\n(schema/README.md \"Operator policy\"; LoadOptions::allow_operators, or export-cli "
          "--allow-op, lets a trusted archive call a refused operator)";
  }
  throw OpResolutionError(os.str());
}

}  // namespace pt2rt
