// loader/validate.cpp — semantic checks of a decoded Program (see validate.h).
#include "validate.h"

#include <map>
#include <set>
#include <string>
#include <variant>

#include "pt2rt/constants.h"
#include "pt2rt/errors.h"

namespace pt2rt {

bool checked_numel(const std::vector<int64_t>& sizes, int64_t* out) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0 || __builtin_mul_overflow(n, s, &n)) return false;
  }
  *out = n;
  return true;
}

bool checked_storage_numel(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                           int64_t storage_offset, int64_t* out) {
  if (sizes.size() != strides.size() || storage_offset < 0) return false;
  int64_t numel = 0;
  if (!checked_numel(sizes, &numel)) return false;
  for (int64_t st : strides) {
    if (st < 0) return false;
  }
  if (numel == 0) {
    *out = 0;
    return true;
  }
  int64_t extent = 1;  // index of the last element + 1, from the storage offset
  for (size_t i = 0; i < sizes.size(); ++i) {
    int64_t span = 0;
    if (__builtin_mul_overflow(sizes[i] - 1, strides[i], &span) ||
        __builtin_add_overflow(extent, span, &extent)) {
      return false;
    }
  }
  return !__builtin_add_overflow(extent, storage_offset, out);
}

bool checked_nbytes(int64_t numel, c10::ScalarType dtype, uint64_t* out) {
  if (numel < 0) return false;
  const uint64_t elem = c10::elementSize(dtype);
  return !__builtin_mul_overflow(static_cast<uint64_t>(numel), elem, out);
}

namespace {

/// Program::output_names, input parameter names and keys: each at most this long.
constexpr size_t kMaxOutputNameBytes = 256;

std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

bool is_quantized(c10::ScalarType t) { return c10::isQIntType(t); }

bool can_require_grad(c10::ScalarType t) {
  return c10::isFloatingType(t) || c10::isComplexType(t);
}

class Validator {
 public:
  explicit Validator(const Program& p) : p_(p) {}

  void run() {
    check_operators();
    check_symbols();
    check_weights();
    std::set<GraphRole> roles;
    for (const Graph& g : p_.graphs) {
      if (!roles.insert(g.role).second) {
        fail("graph '" + std::string(to_string(g.role)) + "' appears more than once");
      }
    }
    for (const Graph& g : p_.graphs) check_graph(g);
    check_pairing();
    check_examples();
    check_output_names();
    check_inputs();
  }

 private:
  const Program& p_;
  std::map<std::string, const WeightInfo*> weights_;
  std::string where_;

  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(std::string(kProgramEntry) + ": " + (where_.empty() ? "" : where_ + ": ") +
                      what);
  }

  void check_operators() {
    for (size_t i = 0; i < p_.operators.size(); ++i) {
      if (p_.operators[i].name.empty()) fail("operator " + std::to_string(i) + " has no name");
    }
  }

  void check_symbols() {
    for (const RangeConstraint& rc : p_.range_constraints) {
      if (rc.symbol >= p_.symbols.size()) {
        fail("range constraint names symbol " + std::to_string(rc.symbol) + ", but there are " +
             std::to_string(p_.symbols.size()) + " symbols");
      }
      if (rc.min > rc.max) {
        fail("range constraint of symbol '" + p_.symbols[rc.symbol].name + "' has min " +
             std::to_string(rc.min) + " > max " + std::to_string(rc.max));
      }
    }
  }

  void check_weights() {
    std::set<std::string> entries;
    for (size_t i = 0; i < p_.weights.size(); ++i) {
      const WeightInfo& w = p_.weights[i];
      where_ = "weight " + std::to_string(i) + " '" + w.fqn + "'";
      if (w.fqn.empty()) fail("empty FQN");
      if (!weights_.emplace(w.fqn, &w).second) fail("duplicate FQN");
      if (w.entry.rfind(kWeightsPrefix, 0) != 0 || w.entry.size() == std::string(kWeightsPrefix).size()) {
        fail("entry '" + w.entry + "' is not under '" + kWeightsPrefix + "'");
      }
      if (!entries.insert(w.entry).second) fail("entry '" + w.entry + "' is used by two weights");
      if (is_quantized(w.dtype)) {
        fail(std::string("quantized dtype ") + c10::toString(w.dtype) + " is not supported");
      }
      if (w.sizes.size() != w.strides.size()) {
        fail("sizes " + join(w.sizes) + " and strides " + join(w.strides) +
             " have different lengths");
      }
      for (int64_t s : w.sizes) {
        if (s < 0) fail("negative size in sizes " + join(w.sizes));
      }
      for (int64_t s : w.strides) {
        if (s < 0) fail("negative stride in strides " + join(w.strides));
      }
      if (w.storage_offset < 0) fail("negative storage_offset " + std::to_string(w.storage_offset));
      int64_t numel = 0, storage = 0;
      uint64_t nbytes = 0;
      if (!checked_numel(w.sizes, &numel) ||
          !checked_storage_numel(w.sizes, w.strides, w.storage_offset, &storage) ||
          !checked_nbytes(storage, w.dtype, &nbytes)) {
        fail("sizes " + join(w.sizes) + ", strides " + join(w.strides) + ", storage_offset " +
             std::to_string(w.storage_offset) + " overflow 64-bit element/byte counts");
      }
      if (nbytes != w.byte_length) {
        fail("byte_length " + std::to_string(w.byte_length) + " != " +
             std::to_string(c10::elementSize(w.dtype)) + " (" + c10::toString(w.dtype) +
             ") x " + std::to_string(storage) + " storage elements = " + std::to_string(nbytes));
      }
      if (w.requires_grad && !can_require_grad(w.dtype)) {
        fail(std::string("requires_grad on non-floating dtype ") + c10::toString(w.dtype));
      }
    }
    where_.clear();
  }

  // --- SymExpr / values ------------------------------------------------------------------

  void check_sym(const SymExpr& e, const std::string& what) {
    size_t arity = 2;
    switch (e.op) {
      case SymOp::Const: arity = 0; break;
      case SymOp::Symbol:
        arity = 0;
        if (e.symbol >= p_.symbols.size()) {
          fail(what + " names symbol " + std::to_string(e.symbol) + ", but there are " +
               std::to_string(p_.symbols.size()) + " symbols");
        }
        break;
      case SymOp::Neg: arity = 1; break;
      default: break;
    }
    if (e.operands.size() != arity) {
      fail(what + ": SymOp " + std::to_string(static_cast<int>(e.op)) + " takes " +
           std::to_string(arity) + " operands, has " + std::to_string(e.operands.size()));
    }
    for (const SymExpr& o : e.operands) check_sym(o, what);
  }

  void check_dims(const std::vector<Dim>& dims, const std::string& what) {
    for (const Dim& d : dims) {
      if (d.value < 0) fail(what + " has negative entry " + std::to_string(d.value));
      if (d.expr) check_sym(*d.expr, what);
    }
  }

  void check_value(const Value& v, size_t id) {
    const std::string what = "value " + std::to_string(id) + " '" + v.name + "'";
    if (v.meta) {
      if (v.kind != ValueKind::Tensor) fail(what + " of kind " + to_string(v.kind) + " has tensor meta");
      const TensorMeta& m = *v.meta;
      check_dims(m.sizes, what + " sizes");
      check_dims(m.strides, what + " strides");
      if (!m.strides.empty() && m.strides.size() != m.sizes.size()) {
        fail(what + " has " + std::to_string(m.sizes.size()) + " sizes but " +
             std::to_string(m.strides.size()) + " strides");
      }
      check_dims({m.storage_offset}, what + " storage_offset");
      std::vector<int64_t> hints;
      for (const Dim& d : m.sizes) hints.push_back(d.value);
      int64_t numel = 0;
      if (!checked_numel(hints, &numel)) fail(what + " sizes " + join(hints) + " overflow int64");
    }
    if (v.sym) check_sym(*v.sym, what);
  }

  // --- graphs ----------------------------------------------------------------------------

  struct GraphState {
    const Graph* g = nullptr;
    std::vector<bool> defined;
  };

  const Value& ref(GraphState& st, int64_t id, const std::string& what,
                   std::initializer_list<ValueKind> kinds) {
    const Graph& g = *st.g;
    if (id < 0 || static_cast<uint64_t>(id) >= g.values.size()) {
      fail(what + " refers to value " + std::to_string(id) + ", but the graph has " +
           std::to_string(g.values.size()) + " values");
    }
    const Value& v = g.values[static_cast<size_t>(id)];
    if (!st.defined[static_cast<size_t>(id)]) {
      fail(what + " uses value " + std::to_string(id) + " '" + v.name +
           "' before it is defined");
    }
    bool ok = kinds.size() == 0;
    for (ValueKind k : kinds) ok = ok || v.kind == k;
    if (!ok) {
      fail(what + " refers to value " + std::to_string(id) + " '" + v.name + "' of kind " +
           to_string(v.kind) + ", expected " + to_string(*kinds.begin()));
    }
    return v;
  }

  void define(GraphState& st, int64_t id, const std::string& what) {
    const Graph& g = *st.g;
    if (id < 0 || static_cast<uint64_t>(id) >= g.values.size()) {
      fail(what + " defines value " + std::to_string(id) + ", but the graph has " +
           std::to_string(g.values.size()) + " values");
    }
    if (st.defined[static_cast<size_t>(id)]) {
      fail(what + " defines value " + std::to_string(id) + " '" +
           g.values[static_cast<size_t>(id)].name + "', which is already defined");
    }
    st.defined[static_cast<size_t>(id)] = true;
  }

  void check_argument(GraphState& st, const Argument& a, const std::string& node) {
    const std::string what = node + ": argument '" + a.name + "'";
    std::visit(
        [&](const auto& v) {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, TensorRef>) {
            ref(st, v.value, what, {ValueKind::Tensor});
          } else if constexpr (std::is_same_v<V, TensorListArg>) {
            for (ValueId id : v.values) ref(st, id, what, {ValueKind::Tensor});
          } else if constexpr (std::is_same_v<V, OptionalTensorListArg>) {
            for (int64_t id : v.values) {
              if (id != -1) ref(st, id, what, {ValueKind::Tensor});
            }
          } else if constexpr (std::is_same_v<V, TensorListRef>) {
            ref(st, v.value, what, {ValueKind::TensorList, ValueKind::OptionalTensorList});
          } else if constexpr (std::is_same_v<V, SymIntRef>) {
            ref(st, v.value, what, {ValueKind::SymInt});
          } else if constexpr (std::is_same_v<V, SymIntListArg>) {
            for (size_t i = 0; i < v.values.size(); ++i) {
              if (v.is_ref[i]) ref(st, v.values[i], what, {ValueKind::SymInt});
            }
          } else if constexpr (std::is_same_v<V, SymFloatRef>) {
            ref(st, v.value, what, {ValueKind::SymFloat});
          } else if constexpr (std::is_same_v<V, SymBoolRef>) {
            ref(st, v.value, what, {ValueKind::SymBool});
          }
        },
        a.value);
  }

  const WeightInfo* weight_of(const std::string& fqn) const {
    auto it = weights_.find(fqn);
    return it == weights_.end() ? nullptr : it->second;
  }

  void check_input_descriptor(const InputDescriptor& d, const std::string& what) {
    auto need_weight = [&](WeightKind kind) {
      const WeightInfo* w = weight_of(d.fqn);
      if (w == nullptr || w->kind != kind) {
        fail(what + " " + d.to_string() + " names no " + to_string(kind) + " of the program");
      }
    };
    switch (d.kind) {
      case InputKind::Unknown:
        fail(what + " has descriptor kind Unknown (0), which is never valid");
      case InputKind::Param: need_weight(WeightKind::Parameter); break;
      case InputKind::Buffer: need_weight(WeightKind::Buffer); break;
      case InputKind::Constant: need_weight(WeightKind::Constant); break;
      case InputKind::Tangent:
        if (!d.output) fail(what + " " + d.to_string() + " does not say which output it belongs to");
        check_output_descriptor(*d.output, what + " (tangent's output)");
        break;
      default:
        if (has_base(d.kind)) {
          if (!d.base) fail(what + " " + d.to_string() + " has no base");
          check_input_descriptor(*d.base, what + " (base)");
        }
        break;
    }
    if (d.idx < 0) fail(what + " " + d.to_string() + " has a negative index");
  }

  void check_output_descriptor(const OutputDescriptor& d, const std::string& what) {
    switch (d.kind) {
      case OutputKind::Unknown:
        fail(what + " has descriptor kind Unknown (0), which is never valid");
      case OutputKind::Grad: {
        if (!d.of) fail(what + " " + d.to_string() + " does not say whose gradient it is");
        check_input_descriptor(*d.of, what + " (grad_of)");
        if (d.of->kind == InputKind::Param) {
          const WeightInfo* w = weight_of(d.of->fqn);
          if (!w->requires_grad) {
            fail(what + " " + d.to_string() + " names frozen parameter '" + d.of->fqn +
                 "' (requires_grad=False); only trainable inputs get gradients");
          }
        } else if (d.of->kind != InputKind::Plain) {
          fail(what + " " + d.to_string() + " does not name a trainable input (a Param or Plain input)");
        }
        break;
      }
      case OutputKind::InputMutation:
        if (!d.of) fail(what + " " + d.to_string() + " does not say which input it mutates");
        check_input_descriptor(*d.of, what + " (mutated_input)");
        break;
      default:
        if (has_base(d.kind)) {
          if (!d.base) fail(what + " " + d.to_string() + " has no base");
          check_output_descriptor(*d.base, what + " (base)");
        }
        break;
    }
    if (d.idx < 0) fail(what + " " + d.to_string() + " has a negative index");
  }

  void check_dense(const std::vector<int64_t>& idx, const std::string& what) {
    std::vector<bool> seen(idx.size(), false);
    for (int64_t i : idx) {
      if (i < 0 || static_cast<size_t>(i) >= idx.size() || seen[static_cast<size_t>(i)]) {
        fail(what + " indices must be 0..n-1 (n = " + std::to_string(idx.size()) +
             "), each once; found " + join(idx));
      }
      seen[static_cast<size_t>(i)] = true;
    }
  }

  void check_graph(const Graph& g) {
    const std::string gname = std::string("graph '") + to_string(g.role) + "'";
    where_ = gname;
    const bool backward = g.role == GraphRole::Backward || g.role == GraphRole::Joint;
    for (size_t i = 0; i < g.values.size(); ++i) check_value(g.values[i], i);

    GraphState st{&g, std::vector<bool>(g.values.size(), false)};
    std::set<std::string> seen_in;
    std::vector<int64_t> plain_in;
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const GraphInput& in = g.inputs[i];
      const std::string what = "input " + std::to_string(i);
      define(st, in.value, what);
      check_input_descriptor(in.descriptor, what);
      const InputKind k = in.descriptor.kind;
      if ((k == InputKind::Tangent || k == InputKind::Saved) && !(g.role == GraphRole::Backward ||
          (k == InputKind::Tangent && g.role == GraphRole::Joint))) {
        fail(what + " " + in.descriptor.to_string() + " is not allowed in this graph");
      }
      if (!seen_in.insert(in.descriptor.to_string()).second) {
        fail(what + " repeats descriptor " + in.descriptor.to_string());
      }
      if (k == InputKind::Plain) plain_in.push_back(in.descriptor.idx);
    }
    check_dense(plain_in, "PlainAOTInput");

    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      std::string node = "node " + std::to_string(i) + " '" + n.debug.fx_name + "'";
      if (n.op >= p_.operators.size()) {
        fail(node + " uses operator " + std::to_string(n.op) + ", but there are " +
             std::to_string(p_.operators.size()) + " operators");
      }
      node += " (" + p_.operators[n.op].qualified() + ")";
      for (const Argument& a : n.args) check_argument(st, a, node);
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        define(st, n.outputs[k], node + " output " + std::to_string(k));
      }
    }

    std::set<std::string> seen_out;
    std::vector<int64_t> plain_out;
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const GraphOutput& out = g.outputs[i];
      const std::string what = "output " + std::to_string(i);
      check_output_descriptor(out.descriptor, what);
      if (out.value != -1) ref(st, out.value, what, {});
      const OutputKind k = out.descriptor.kind;
      if (k == OutputKind::Grad && !backward) {
        fail(what + " " + out.descriptor.to_string() + " is not allowed in this graph");
      }
      if (k == OutputKind::Saved && g.role != GraphRole::Forward) {
        fail(what + " " + out.descriptor.to_string() + " is not allowed in this graph");
      }
      if (k == OutputKind::Saved && out.value == -1) {
        fail(what + " " + out.descriptor.to_string() + " is None");
      }
      // seen_in holds every input descriptor's text: one lookup, not a scan of the inputs
      // (the check must stay linear in the program's size).
      if (k == OutputKind::InputMutation && seen_in.count(out.descriptor.of->to_string()) == 0) {
        fail(what + " " + out.descriptor.to_string() + " names no input of this graph");
      }
      if (!seen_out.insert(out.descriptor.to_string()).second) {
        fail(what + " repeats descriptor " + out.descriptor.to_string());
      }
      if (k == OutputKind::Plain) plain_out.push_back(out.descriptor.idx);
    }
    check_dense(plain_out, "PlainAOTOutput");
    where_.clear();
  }

  static size_t count_inputs(const Graph& g, InputKind k) {
    size_t n = 0;
    for (const GraphInput& in : g.inputs) n += in.descriptor.kind == k;
    return n;
  }
  static size_t count_outputs(const Graph& g, OutputKind k) {
    size_t n = 0;
    for (const GraphOutput& o : g.outputs) n += o.descriptor.kind == k;
    return n;
  }

  // Cross-graph contracts between forward, backward and inference.
  void check_pairing() {
    const Graph* fwd = p_.graph(GraphRole::Forward);
    const Graph* bwd = p_.graph(GraphRole::Backward);
    const Graph* inf = p_.graph(GraphRole::Inference);
    if ((fwd == nullptr) != (bwd == nullptr)) {
      fail(std::string("graph '") + (fwd ? "forward" : "backward") + "' has no matching '" +
           (fwd ? "backward" : "forward") + "' graph");
    }
    if (inf != nullptr && fwd != nullptr) {
      if (count_inputs(*inf, InputKind::Plain) != count_inputs(*fwd, InputKind::Plain)) {
        fail("graph 'inference' takes " + std::to_string(count_inputs(*inf, InputKind::Plain)) +
             " user inputs, graph 'forward' " + std::to_string(count_inputs(*fwd, InputKind::Plain)));
      }
      if (count_outputs(*inf, OutputKind::Plain) != count_outputs(*fwd, OutputKind::Plain)) {
        fail("graph 'inference' returns " + std::to_string(count_outputs(*inf, OutputKind::Plain)) +
             " user outputs, graph 'forward' " +
             std::to_string(count_outputs(*fwd, OutputKind::Plain)));
      }
    }
    if (fwd == nullptr) return;
    where_ = "graph 'backward'";
    // Saved(k): forward output k <-> backward input k, same value kind.
    std::map<int64_t, ValueKind> saved_out;
    for (const GraphOutput& o : fwd->outputs) {
      if (o.descriptor.kind == OutputKind::Saved) {
        saved_out[o.descriptor.idx] = fwd->values[static_cast<size_t>(o.value)].kind;
      }
    }
    // Descriptor texts of forward's inputs and outputs, looked up once per backward
    // input/output (linear, not inputs x outputs).
    std::set<std::string> fwd_inputs, fwd_outputs;
    for (const GraphInput& in : fwd->inputs) fwd_inputs.insert(in.descriptor.to_string());
    for (const GraphOutput& o : fwd->outputs) fwd_outputs.insert(o.descriptor.to_string());
    size_t saved_in = 0;
    for (size_t i = 0; i < bwd->inputs.size(); ++i) {
      const GraphInput& in = bwd->inputs[i];
      const std::string what = "input " + std::to_string(i) + " " + in.descriptor.to_string();
      if (in.descriptor.kind == InputKind::Saved) {
        ++saved_in;
        auto it = saved_out.find(in.descriptor.idx);
        if (it == saved_out.end()) {
          fail(what + " has no SavedForBackwardsAOTOutput(idx=" +
               std::to_string(in.descriptor.idx) + ") in graph 'forward'");
        }
        const ValueKind k = bwd->values[in.value].kind;
        if (k != it->second) {
          fail(what + " is a " + to_string(k) + ", but graph 'forward' saves a " +
               to_string(it->second));
        }
      } else if (in.descriptor.kind == InputKind::Tangent &&
                 fwd_outputs.count(in.descriptor.output->to_string()) == 0) {
        fail(what + " is the tangent of no output of graph 'forward'");
      }
    }
    if (saved_in != saved_out.size()) {
      fail("takes " + std::to_string(saved_in) + " saved values, graph 'forward' saves " +
           std::to_string(saved_out.size()));
    }
    for (size_t i = 0; i < bwd->outputs.size(); ++i) {
      const GraphOutput& o = bwd->outputs[i];
      if (o.descriptor.kind != OutputKind::Grad) continue;
      if (fwd_inputs.count(o.descriptor.of->to_string()) == 0) {
        fail("output " + std::to_string(i) + " " + o.descriptor.to_string() +
             " names no input of graph 'forward'");
      }
    }
    where_.clear();
  }

  void check_tensor_data(const TensorData& t, const std::string& what) {
    if (is_quantized(t.dtype)) fail(what + ": quantized dtype is not supported");
    int64_t numel = 0;
    uint64_t nbytes = 0;
    if (!checked_numel(t.sizes, &numel) || !checked_nbytes(numel, t.dtype, &nbytes)) {
      fail(what + ": sizes " + join(t.sizes) + " are negative or overflow");
    }
    if (nbytes != t.data.size()) {
      fail(what + ": holds " + std::to_string(t.data.size()) + " bytes, " +
           c10::toString(t.dtype) + join(t.sizes) + " needs " + std::to_string(nbytes));
    }
  }

  /// A sketch's cost to check is numel x projections (grad_sketch.h): both bounded here.
  void check_grad_sketch(const GradSketch& s, const std::string& what) {
    int64_t numel = 0;
    if (!checked_numel(s.sizes, &numel) || static_cast<uint64_t>(numel) >= kGradSketchMaxNumel) {
      fail(what + ": sizes " + join(s.sizes) + " are negative, overflow or reach 2^32 elements");
    }
    if (!c10::isFloatingType(s.dtype)) {
      fail(what + ": dtype " + std::string(c10::toString(s.dtype)) + " is not floating");
    }
    if (s.projections.size() > kGradSketchMaxProjections) {
      fail(what + ": " + std::to_string(s.projections.size()) + " projections, at most " +
           std::to_string(kGradSketchMaxProjections));
    }
    if (s.float64 && (s.float64->sizes != s.sizes ||
                      s.float64->projections.size() != s.projections.size())) {
      fail(what + ": its float64 sketch has other sizes or another number of projections");
    }
  }

  /// Program::output_names (schema 1.4): none (older archives), or one per Plain output of the
  /// graph that defines the signature (inference, else forward), each a short line of text.
  void check_output_names() {
    where_.clear();
    if (p_.output_names.empty()) return;
    const Graph* g = signature_graph();
    size_t outputs = 0;
    if (g != nullptr) {
      for (const GraphOutput& o : g->outputs) outputs += o.descriptor.kind == OutputKind::Plain;
    }
    if (p_.output_names.size() != outputs) {
      fail(std::to_string(p_.output_names.size()) + " output names for " +
           std::to_string(outputs) + " user outputs");
    }
    check_names(p_.output_names, "output name");
  }

  /// Program::inputs (schema 1.6): none (older archives), or forward()'s parameters whose
  /// structures hold as many tensors as the signature graph has user inputs; names and Dict
  /// keys as output names are; kinds known; keys in Dicts only, one per child.
  void check_inputs() {
    where_.clear();
    if (p_.inputs.empty()) return;
    const Graph* g = signature_graph();
    size_t inputs = 0;
    if (g != nullptr) {
      for (const GraphInput& i : g->inputs) inputs += i.descriptor.kind == InputKind::Plain;
    }
    std::vector<std::string> names;
    size_t tensors = 0;
    for (const InputParam& param : p_.inputs) {
      names.push_back(param.name);
      check_input_spec(param.spec, "input '" + param.name + "'");
      tensors += param.spec.num_tensors();
    }
    check_names(names, "input parameter name");
    if (tensors != inputs) {
      fail("the input parameters hold " + std::to_string(tensors) + " tensors for " +
           std::to_string(inputs) + " user inputs");
    }
  }

  void check_input_spec(const InputSpec& s, const std::string& what) {
    if (static_cast<uint8_t>(s.kind) > static_cast<uint8_t>(InputSpec::Kind::Dict)) {
      fail(what + ": unknown InputSpecKind " + std::to_string(static_cast<int>(s.kind)));
    }
    if (s.kind == InputSpec::Kind::Tensor && !s.children.empty()) {
      fail(what + ": a Tensor with children");
    }
    if (s.kind == InputSpec::Kind::Dict ? s.keys.size() != s.children.size() : !s.keys.empty()) {
      fail(what + ": " + std::to_string(s.keys.size()) + " keys for " +
           std::to_string(s.children.size()) + " children");
    }
    check_names(s.keys, what + " key");
    for (size_t i = 0; i < s.children.size(); ++i) {
      check_input_spec(s.children[i], what + "[" + std::to_string(i) + "]");
    }
  }

  /// Each name 1..kMaxOutputNameBytes bytes, no control character, all different.
  void check_names(const std::vector<std::string>& names, const std::string& what_each) {
    std::set<std::string> seen;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& n = names[i];
      const std::string what = what_each + " " + std::to_string(i);
      if (n.empty() || n.size() > kMaxOutputNameBytes) {
        fail(what + " is " + std::to_string(n.size()) + " bytes long (1 to " +
             std::to_string(kMaxOutputNameBytes) + " allowed)");
      }
      for (unsigned char c : n) {
        if (c < 0x20 || c == 0x7f) fail(what + " holds a control character");
      }
      if (!seen.insert(n).second) fail(what + " '" + n + "' is used twice");
    }
  }

  const Graph* signature_graph() const {
    const Graph* g = p_.graph(GraphRole::Inference);
    return g != nullptr ? g : p_.graph(GraphRole::Forward);
  }

  void check_examples() {
    for (size_t e = 0; e < p_.examples.size(); ++e) {
      const Example& ex = p_.examples[e];
      const std::string w = "example " + std::to_string(e) + " '" + ex.name + "'";
      for (size_t i = 0; i < ex.inputs.size(); ++i) {
        check_tensor_data(ex.inputs[i], w + " input " + std::to_string(i));
      }
      if (!ex.references) continue;
      const ExampleReferences& r = *ex.references;
      for (size_t i = 0; i < r.outputs.size(); ++i) check_tensor_data(r.outputs[i], w + " output " + std::to_string(i));
      for (size_t i = 0; i < r.train_outputs.size(); ++i) check_tensor_data(r.train_outputs[i], w + " train output " + std::to_string(i));
      for (size_t i = 0; i < r.grad_outputs.size(); ++i) check_tensor_data(r.grad_outputs[i], w + " grad output " + std::to_string(i));
      for (const auto& [name, t] : r.grads) check_tensor_data(t, w + " grad '" + name + "'");
      for (const auto& [name, t] : r.buffers) check_tensor_data(t, w + " buffer '" + name + "'");
      for (const auto& s : r.grad_sketches) check_grad_sketch(s, w + " gradient sketch '" + s.name + "'");
    }
  }
};

}  // namespace

void validate_program(const Program& program) { Validator(program).run(); }

}  // namespace pt2rt
