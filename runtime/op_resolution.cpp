// runtime/op_resolution.cpp — see op_resolution.h.
#include "op_resolution.h"

#include <torch/csrc/api/include/torch/version.h>

#include <sstream>

#include "pt2rt/errors.h"

namespace pt2rt {

std::string running_torch_version() { return TORCH_VERSION; }

void ResolutionReport::missing_operator(const Operator& op) { missing_.push_back(&op); }

void ResolutionReport::mismatch(const Operator& op, const std::string& argument,
                                const std::string& problem, const std::string& where) {
  Seen& s = mismatches_[{op.qualified(), argument, problem}];
  if (s.count++ == 0) {
    s.schema = op.schema;
    s.where = where;
  }
}

void ResolutionReport::throw_if_any(const Program& program) const {
  if (empty()) return;
  std::vector<std::string> items;
  std::ostringstream os;
  const std::string& exported = program.producer.torch_version;
  os << "the archive (exported with torch " << (exported.empty() ? "<unknown>" : exported)
     << ") does not fit the running LibTorch (running torch " << running_torch_version()
     << "):";
  if (!missing_.empty()) {
    os << "\n  " << missing_.size() << " operator" << (missing_.size() == 1 ? " is" : "s are")
       << " not available in the running LibTorch:";
    for (const Operator* op : missing_) {
      items.push_back(op->qualified());
      os << "\n    " << op->qualified();
      if (!op->schema.empty()) os << "    (schema at export: " << op->schema << ")";
    }
  }
  if (!mismatches_.empty()) {
    os << "\n  " << mismatches_.size() << " argument" << (mismatches_.size() == 1 ? " does" : "s do")
       << " not fit the running LibTorch's schemas:";
    for (const auto& [key, s] : mismatches_) {
      const auto& [op, argument, problem] = key;
      items.push_back(op + "(" + (argument.empty() ? std::string("->") : argument) + ")");
      os << "\n    " << op << ": ";
      if (!argument.empty()) os << "argument '" << argument << "' ";
      os << problem
         << "    (schema at export: " << s.schema << "; " << s.where;
      if (s.count > 1) os << " and " << (s.count - 1) << " more node" << (s.count > 2 ? "s" : "");
      os << ")";
    }
  }
  throw OpResolutionError(os.str(), std::move(items));
}

std::vector<ResolvedOp> resolve_operators(const Program& program, ResolutionReport* report) {
  std::vector<ResolvedOp> resolved(program.operators.size());
  ResolutionReport own;
  ResolutionReport& r = report ? *report : own;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (size_t i = 0; i < program.operators.size(); ++i) {
    const Operator& op = program.operators[i];
    if (const NativeOp* native = find_native_op(op.name, op.overload)) {
      resolved[i].native = native;
      continue;
    }
    // findSchema (not findSchemaOrThrow): we collect every miss before throwing.
    auto handle = dispatcher.findSchema(c10::OperatorName(op.name, op.overload));
    if (!handle.has_value()) {
      r.missing_operator(op);
      continue;
    }
    resolved[i].handle = *handle;
    resolved[i].schema_differs = !op.schema.empty() && op.schema != c10::toString(handle->schema());
  }
  if (!report) own.throw_if_any(program);
  return resolved;
}

}  // namespace pt2rt
