// runtime/input_check.cpp — see input_check.h.
#include "input_check.h"

#include <sstream>

#include "pt2rt/errors.h"
#include "tensor_format.h"

namespace pt2rt {
namespace {

bool same_device(c10::Device got, c10::Device want) {
  return got.type() == want.type() && (!want.has_index() || got.index() == want.index());
}

/// The range [min, max] a symbolic dim may take: from the range constraint when the
/// dim is a bare symbol, else unconstrained (checked by the kernels).
bool within_range(const Dim& d, int64_t size, const Program& program, int64_t& lo, int64_t& hi) {
  lo = 0;
  hi = INT64_MAX;
  if (d.expr->op != SymOp::Symbol) return size >= 0;
  for (const RangeConstraint& rc : program.range_constraints) {
    if (rc.symbol == d.expr->symbol) {
      lo = rc.min;
      hi = rc.max;
    }
  }
  return size >= lo && size <= hi;
}

}  // namespace

void check_inputs(const std::vector<at::Tensor>& inputs, const Program& program,
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
      return v.meta ? describe_meta(*v.meta, program) + " on " + device.str() : "a tensor";
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
      int64_t size = t.size(static_cast<int64_t>(d));
      if (dim.is_static()) {
        if (size != dim.value) throw InputError(prefix() + got());
        continue;
      }
      int64_t lo = 0, hi = 0;
      if (!within_range(dim, size, program, lo, hi)) {
        throw InputError(prefix() + got() + " (dim " + std::to_string(d) + " = " +
                         std::to_string(size) + " is outside " +
                         describe_sym_expr(*dim.expr, program) + " in [" + std::to_string(lo) +
                         ", " + (hi == INT64_MAX ? std::string("inf") : std::to_string(hi)) +
                         "])");
      }
    }
  }
}

}  // namespace pt2rt
