// pt2rt_op_policy_report — pt2rt's operator policy applied to every operator the running
// LibTorch's dispatcher knows (c10::Dispatcher::getAllOpNames). The figures in
// schema/README.md ("Operator policy") come from this program, run on each lane.
//
//   pt2rt_op_policy_report                 counts: operators per namespace, ATen operators
//                                          allowed / refused per rule
//   pt2rt_op_policy_report --list RULE     the operators of one rule ("allowed", "denied",
//                                          "namespace", "mutates", ...), one a line, with why
//   pt2rt_op_policy_report --no-meta       allowed ATen operators without a Meta kernel (their
//                                          results are checked after each run instead)
//   pt2rt_op_policy_report --str-names     names of the str arguments of ATen operators that
//                                          pass every other rule (the mode selector candidates)
//   pt2rt_op_policy_report --archives-in DIR
//                                          the operators the *.pt2 archives in DIR use (what
//                                          the exporter emitted on this lane), with verdicts;
//                                          exit 1 if the policy refuses any
//   pt2rt_op_policy_report --expect-allowed OP... --expect-refused OP...
//                                          exit 1 unless each OP ("aten::mm" for the default
//                                          overload, "aten::add.Tensor") has that verdict
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/jit_type.h>
#include <torch/csrc/api/include/torch/version.h>

#include <dirent.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/native_ops.h"
#include "plan/op_policy.h"
#include "pt2rt/archive.h"
#include "pt2rt/program.h"

namespace {

struct Entry {
  std::string name;  // aten::add.Tensor
  std::string ns;
  c10::OperatorHandle handle;
  pt2rt::OpVerdict verdict;
};

std::vector<Entry> enumerate() {
  std::vector<Entry> out;
  auto& d = c10::Dispatcher::singleton();
  for (const c10::OperatorName& n : d.getAllOpNames()) {
    auto h = d.findSchema(n);
    if (!h) continue;  // registered without a schema (def pending)
    const std::string q = n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
    out.push_back({q, n.name.substr(0, n.name.find("::")), *h, pt2rt::classify_operator(*h)});
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

/// "aten::mm" is mm's default overload, "aten::add.Tensor" one overload.
bool matches(const Entry& e, const std::string& pattern) { return e.name == pattern; }

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Entry> ops = enumerate();
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--list") {
    const std::string rule = args.size() > 1 ? args[1] : "allowed";
    for (const Entry& e : ops) {
      if (rule == "all" || (rule == "allowed" && e.verdict.allowed) || e.verdict.rule == rule) {
        std::cout << e.name << (e.verdict.allowed ? "" : "  # " + e.verdict.reason) << "\n";
      }
    }
    return 0;
  }
  if (!args.empty() && args[0] == "--no-meta") {
    for (const Entry& e : ops) {
      if (e.verdict.allowed && !e.handle.hasComputedKernelForDispatchKey(c10::DispatchKey::Meta)) {
        std::cout << e.name << "\n";
      }
    }
    return 0;
  }
  if (!args.empty() && args[0] == "--str-names") {
    std::map<std::string, std::set<std::string>> names;
    for (const Entry& e : ops) {
      if (e.ns != "aten" || (e.verdict.rule != "str-argument" && !e.verdict.allowed)) continue;
      for (const c10::Argument& a : e.handle.schema().arguments()) {
        c10::TypePtr t = a.real_type();
        if (t->kind() == c10::TypeKind::OptionalType) {
          t = t->castRaw<c10::OptionalType>()->getElementType();
        }
        if (t->kind() == c10::TypeKind::StringType) names[a.name()].insert(e.name);
      }
    }
    for (const auto& [name, users] : names) {
      std::cout << name << " (" << users.size() << "): " << *users.begin()
                << (users.size() > 1 ? ", ..." : "") << "\n";
    }
    return 0;
  }
  if (args.size() == 2 && args[0] == "--archives-in") {
    std::map<std::string, std::set<std::string>> users;  // op -> archives
    DIR* d = ::opendir(args[1].c_str());
    if (d == nullptr) {
      std::cerr << "cannot open " << args[1] << "\n";
      return 2;
    }
    while (const dirent* ent = ::readdir(d)) {
      const std::string f = ent->d_name;
      if (f.size() < 4 || f.compare(f.size() - 4, 4, ".pt2") != 0) continue;
      const pt2rt::Archive a = pt2rt::Archive::open(args[1] + "/" + f);
      const auto program = pt2rt::read_program(a);
      for (const pt2rt::Operator& op : program->operators) {
        users[op.qualified()].insert(f);
      }
    }
    ::closedir(d);
    bool ok = true;
    for (const auto& [name, files] : users) {
      const std::string base = name.substr(0, name.find('.'));
      const std::string overload = name.size() > base.size() ? name.substr(base.size() + 1) : "";
      // As resolve_operators: pt2rt's native ops (native_ops.h) come before the dispatcher.
      std::optional<c10::OperatorHandle> h;
      if (pt2rt::find_native_op(base, overload) == nullptr) {
        auto found = c10::Dispatcher::singleton().findSchema({base, overload});
        if (found.has_value()) h = *found;
      }
      const pt2rt::OpVerdict v = h ? pt2rt::classify_operator(*h) : pt2rt::OpVerdict{true, "", ""};
      std::cout << (v.allowed ? "allowed " : "REFUSED ") << name << " (" << files.size()
                << " archives" << (h ? "" : "; pt2rt native op") << ")"
                << (v.allowed ? "" : ": " + v.reason) << "\n";
      ok = ok && v.allowed;
    }
    std::cout << users.size() << " distinct operators; " << (ok ? "all allowed" : "SOME REFUSED")
              << "\n";
    return ok ? 0 : 1;
  }
  if (!args.empty() && args[0].rfind("--expect-", 0) == 0) {
    bool want_allowed = true, ok = true;
    for (const std::string& a : args) {
      if (a == "--expect-allowed") { want_allowed = true; continue; }
      if (a == "--expect-refused") { want_allowed = false; continue; }
      bool found = false;
      for (const Entry& e : ops) {
        if (!matches(e, a)) continue;
        found = true;
        if (e.verdict.allowed != want_allowed) {
          std::cout << "UNEXPECTED " << e.name << ": "
                    << (e.verdict.allowed ? "allowed" : "refused (" + e.verdict.reason + ")")
                    << "\n";
          ok = false;
        }
      }
      if (!found && want_allowed) {
        std::cout << "UNKNOWN " << a << " (not in this LibTorch's dispatcher)\n";
        ok = false;
      }
    }
    std::cout << (ok ? "ok" : "FAILED") << "\n";
    return ok ? 0 : 1;
  }

  std::map<std::string, size_t> per_ns;
  std::map<std::string, size_t> per_rule;
  size_t aten = 0, allowed = 0, no_meta = 0;
  for (const Entry& e : ops) {
    ++per_ns[e.ns];
    if (e.ns != "aten") continue;
    ++aten;
    if (e.verdict.allowed) {
      ++allowed;
      no_meta += !e.handle.hasComputedKernelForDispatchKey(c10::DispatchKey::Meta);
    } else {
      ++per_rule[e.verdict.rule];
    }
  }
  std::cout << "LibTorch " << TORCH_VERSION << ": " << ops.size()
            << " operators (overloads) in the dispatcher\n  per namespace:";
  for (const auto& [ns, n] : per_ns) std::cout << " " << ns << " " << n << ";";
  std::cout << "\nATen operators: " << aten << "\n  allowed: " << allowed << " (" << no_meta
            << " of them without a Meta kernel: results checked after each run)\n  refused: "
            << aten - allowed << "\n";
  for (const auto& [rule, n] : per_rule) std::cout << "    " << rule << ": " << n << "\n";
  return 0;
}
