// runtime/exec/input_check.cpp — see input_check.h.
#include "exec/input_check.h"

#include <sstream>

#include "core/sym_eval.h"
#include "core/tensor_format.h"
#include "pt2rt/errors.h"

namespace pt2rt {
namespace {

bool same_device(c10::Device got, c10::Device want) {
  return got.type() == want.type() && (!want.has_index() || got.index() == want.index());
}

std::string range_text(int64_t lo, int64_t hi) {
  return "[" + std::to_string(lo) + ", " + (hi == INT64_MAX ? std::string("inf") : std::to_string(hi)) +
         "]";
}

}  // namespace

std::vector<int64_t> check_inputs(const std::vector<at::Tensor>& inputs, const Program& program,
                  const Graph& graph, const GraphBindings& bindings, c10::Device device) {
  const size_t n = bindings.user_input_positions.size();
  auto input_name = [&](size_t i) -> const std::string& {
    return graph.values[graph.inputs[bindings.user_input_positions[i]].value].name;
  };
  if (inputs.size() != n) {
    std::ostringstream os;
    os << "expected " << n << " input" << (n == 1 ? "" : "s") << " (";
    for (size_t i = 0; i < n; ++i) os << (i ? ", " : "") << input_name(i);
    os << "), got " << inputs.size();
    throw InputError(os.str());
  }
  for (size_t i = 0; i < n; ++i) {
    const Value& v = graph.values[graph.inputs[bindings.user_input_positions[i]].value];
    const at::Tensor& t = inputs[i];
    auto expected = [&] {
      return v.meta ? meta_string(*v.meta, program) + " on " + device.str() : "a tensor";
    };
    auto prefix = [&] {
      return "input " + std::to_string(i) + " (" + v.name + "): expected " + expected();
    };
    if (!t.defined()) throw InputError(prefix() + ", got an undefined tensor");
    // The format's tensors are strided; a sparse, mkldnn, nested or quantized input would reach
    // kernels that were verified (on the meta device) for dense ones only.
    if (t.layout() != c10::kStrided || t.is_quantized() || t.is_mkldnn() || t.is_nested()) {
      std::ostringstream os;
      os << prefix() << ", got a " << (t.is_quantized() ? "quantized" : t.is_nested() ? "nested" : "")
         << " tensor of layout " << t.layout() << " (only strided, dense tensors are accepted)";
      throw InputError(os.str());
    }
    if (!v.meta) continue;
    const TensorMeta& m = *v.meta;
    auto got = [&] {
      std::string s = ", got " + describe_tensor_type(t.scalar_type(), t.sizes());
      if (!same_device(t.device(), device)) s += " on " + t.device().str();
      return s;
    };
    if (t.scalar_type() != m.dtype || t.dim() != static_cast<int64_t>(m.sizes.size()) ||
        !same_device(t.device(), device)) {
      throw InputError(prefix() + got());
    }
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      const Dim& dim = m.sizes[d];
      if (dim.is_static() && t.size(static_cast<int64_t>(d)) != dim.value) {
        throw InputError(prefix() + got());
      }
    }
  }
  return bind_symbols(inputs, program, graph, bindings);
}

std::vector<int64_t> bind_symbols(const std::vector<at::Tensor>& inputs, const Program& program,
                  const Graph& graph, const GraphBindings& bindings) {
  if (program.symbols.empty()) return {};
  // Pass 1: every dim that is a bare symbol binds it (range checked; a second use must agree).
  std::vector<int64_t> value(program.symbols.size(), -1);
  std::vector<std::string> bound_by(program.symbols.size());
  auto where = [&](size_t i, size_t d) {
    const Value& v = graph.values[graph.inputs[bindings.user_input_positions[i]].value];
    return "input " + std::to_string(i) + " (" + v.name + ") dim " + std::to_string(d);
  };
  const size_t n = bindings.user_input_positions.size();
  for (size_t i = 0; i < n && i < inputs.size(); ++i) {
    const Value& v = graph.values[graph.inputs[bindings.user_input_positions[i]].value];
    if (!v.meta) continue;
    for (size_t d = 0; d < v.meta->sizes.size(); ++d) {
      const Dim& dim = v.meta->sizes[d];
      if (dim.is_static() || dim.expr->op != SymOp::Symbol) continue;
      const uint32_t s = dim.expr->symbol;
      const std::string& name = program.symbols[s].name;
      const int64_t size = inputs[i].size(static_cast<int64_t>(d));
      if (value[s] >= 0) {
        if (value[s] != size) {
          throw InputError(where(i, d) + ": " + name + " = " + std::to_string(size) + ", but " +
                           bound_by[s] + " gave " + name + " = " + std::to_string(value[s]) +
                           " (the same symbol means equal sizes)");
        }
        continue;
      }
      for (const RangeConstraint& rc : program.range_constraints) {
        if (rc.symbol == s && (size < rc.min || size > rc.max)) {
          throw InputError(where(i, d) + ": " + name + " = " + std::to_string(size) +
                           " is outside " + range_text(rc.min, rc.max));
        }
      }
      value[s] = size;
      bound_by[s] = where(i, d);
    }
  }
  // Pass 2: every other symbolic dim is a relation (a derived dim): evaluate and compare.
  for (size_t i = 0; i < n && i < inputs.size(); ++i) {
    const Value& v = graph.values[graph.inputs[bindings.user_input_positions[i]].value];
    if (!v.meta) continue;
    for (size_t d = 0; d < v.meta->sizes.size(); ++d) {
      const Dim& dim = v.meta->sizes[d];
      if (dim.is_static() || dim.expr->op == SymOp::Symbol) continue;
      std::vector<int64_t> syms = value;
      std::optional<int64_t> want = eval_sym(*dim.expr, syms);
      const int64_t size = inputs[i].size(static_cast<int64_t>(d));
      if (!want || *want != size) {
        throw InputError(where(i, d) + ": expected " + sym_expr_string(*dim.expr, program) +
                         (want ? " = " + std::to_string(*want) : std::string()) + ", got " +
                         std::to_string(size));
      }
    }
  }
  return value;
}

}  // namespace pt2rt
