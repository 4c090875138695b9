// runtime/plan/op_resolution.cpp — see op_resolution.h.
#include "plan/op_resolution.h"

#include <torch/csrc/api/include/torch/version.h>

#include <sstream>

#include "plan/op_policy.h"
#include "pt2rt/errors.h"
#include "pt2rt/text.h"

namespace pt2rt {

std::string running_torch_version() { return TORCH_VERSION; }

void ResolutionReport::missing_operator(const Operator& op) { missing_.push_back(&op); }

void ResolutionReport::refused_operator(const Operator& op, std::string why) {
  refused_.emplace_back(&op, std::move(why));
}

void ResolutionReport::mismatch(const Operator& op, const std::string& argument,
                                const std::string& problem, const std::string& where) {
  Seen& s = mismatches_[{op.qualified(), argument, problem}];
  if (s.count++ == 0) {
    s.schema = op.schema;
    s.where = where;
  }
}

namespace {

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// At most 8 names, escaped, for the first line (export-cli prints only it without --verbose).
template <typename Items, typename Name>
std::string first_names(const Items& items, Name name) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < 8; ++i) out += (i ? ", " : "") + escaped(name(items[i]), 128);
  if (items.size() > 8) out += ", ... (" + std::to_string(items.size() - 8) + " more)";
  return out;
}

}  // namespace

void ResolutionReport::throw_if_any(const Program& program) const {
  if (empty()) return;
  std::vector<std::string> items;  // OpResolutionError::missing(): what another version lacks
  std::ostringstream head, body;
  if (!refused_.empty()) {
    head << plural(refused_.size(), "operator is", "operators are")
         << " refused by pt2rt's operator policy: "
         << first_names(refused_, [](const auto& r) { return r.first->qualified(); });
    for (const auto& [op, why] : refused_) body << "\n  " << escaped(op->qualified(), 128) << ": " << why;
  }
  if (!missing_.empty() || !mismatches_.empty()) {
    if (!refused_.empty()) head << "; ";
    const std::string& exported = program.producer.torch_version;
    head << "the archive (exported with torch "
         << (exported.empty() ? std::string("<unknown>") : escaped(exported, 64))
         << ") does not fit the running LibTorch (running torch " << running_torch_version() << ")";
    if (!missing_.empty()) {
      head << ": " << plural(missing_.size(), "operator is", "operators are")
           << " not available in the running LibTorch: "
           << first_names(missing_, [](const Operator* op) { return op->qualified(); });
      for (const Operator* op : missing_) {
        items.push_back(op->qualified());
        body << "\n  " << escaped(op->qualified(), 128);
        if (!op->schema.empty()) body << "    (schema at export: " << escaped(op->schema, 512) << ")";
      }
    }
    if (!mismatches_.empty()) {
      head << (missing_.empty() ? ": " : "; ")
           << plural(mismatches_.size(), "argument does", "arguments do")
           << " not fit the running LibTorch's schemas";
      for (const auto& [key, s] : mismatches_) {
        const auto& [op, argument, problem] = key;
        items.push_back(op + "(" + (argument.empty() ? std::string("->") : argument) + ")");
        body << "\n  " << escaped(op, 128) << ": ";
        if (!argument.empty()) body << "argument '" << escaped(argument, 128) << "' ";
        body << problem << "    (schema at export: " << escaped(s.schema, 512) << "; " << s.where;
        if (s.count > 1) body << " and " << (s.count - 1) << " more node" << (s.count > 2 ? "s" : "");
        body << ")";
      }
    }
  }
  if (!refused_.empty()) {
    body << "\n(schema/README.md \"Operator policy\"; LoadOptions::allow_operators, or export-cli "
            "--allow-op, lets a trusted archive call a refused operator)";
  }
  throw OpResolutionError(head.str() + body.str(), std::move(items));
}

std::vector<ResolvedOp> resolve_operators(const Program& program,
                                          const std::vector<std::string>& allow_operators,
                                          ResolutionReport* report) {
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
    const c10::OperatorName name(op.name, op.overload);
    auto handle = dispatcher.findSchema(name);
    if (!handle.has_value()) {
      r.missing_operator(op);
      continue;
    }
    if (!explicitly_allowed(name, allow_operators)) {
      const OpVerdict verdict = classify_operator(*handle);
      if (!verdict.allowed) {
        r.refused_operator(op, verdict.reason);
        continue;
      }
    }
    resolved[i].handle = *handle;
    resolved[i].schema_differs = !op.schema.empty() && op.schema != c10::toString(handle->schema());
  }
  if (!report) own.throw_if_any(program);
  return resolved;
}

}  // namespace pt2rt
