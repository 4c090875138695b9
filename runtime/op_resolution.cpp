// runtime/op_resolution.cpp — see op_resolution.h.
#include "op_resolution.h"

#include <torch/csrc/api/include/torch/version.h>

#include <sstream>

#include "pt2rt/errors.h"

namespace pt2rt {

std::string running_torch_version() { return TORCH_VERSION; }

std::vector<ResolvedOp> resolve_operators(const Program& program) {
  std::vector<ResolvedOp> resolved(program.operators.size());
  std::vector<const Operator*> unknown;
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
      unknown.push_back(&op);
      continue;
    }
    resolved[i].handle = *handle;
  }
  if (!unknown.empty()) {
    std::ostringstream os;
    os << unknown.size() << " operator" << (unknown.size() == 1 ? " is" : "s are")
       << " not available in the running LibTorch (archive exported with torch "
       << (program.producer.torch_version.empty() ? "<unknown>" : program.producer.torch_version)
       << ", running torch " << running_torch_version() << "):";
    for (const Operator* op : unknown) {
      os << "\n  " << op->qualified();
      if (!op->schema.empty()) os << "    (schema at export: " << op->schema << ")";
    }
    throw OpResolutionError(os.str());
  }
  return resolved;
}

}  // namespace pt2rt
