// loader/decode.cpp — program.fb bytes → verified FlatBuffer → plain Program IR.
//
// Order of checks (each failure is a FormatError naming program.fb and the numbers):
//   size → file identifier "PT2R" → schema_version (a bounds-checked peek, so a future major
//   is reported as such even when the rest no longer verifies) → flatbuffers::Verifier with
//   explicit limits → conversion (enums in range, union kinds known, descriptors present)
//   → the semantic pass of validate.cpp.
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "pt2rt/archive.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/program.h"
#include "pt2rt_generated.h"
#include "validate.h"

namespace pt2rt {
namespace {

namespace fbs = pt2rt::fb;

// Verifier limits. Nesting: Program > Graph > Node > Argument > union table > vector is 6
// levels; descriptors and SymExpr trees nest further, 64 leaves ample room. Tables: the
// verifier counts every table visit (shared subtables count once per reference), so a
// bound proportional to the buffer also bounds conversion work and memory.
constexpr flatbuffers::uoffset_t kMaxDepth = 64;
constexpr size_t kMinBufferSize = 8;  // root offset + identifier

flatbuffers::uoffset_t max_tables_for(size_t size) {
  return static_cast<flatbuffers::uoffset_t>(size / 4 + 1024);
}

[[noreturn]] void fail(const std::string& what) {
  throw FormatError(std::string(kProgramEntry) + ": " + what);
}

std::string version_string(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

/// Reads schema_version with only the root table and the SchemaVersion table verified.
/// Returns false when even that part is malformed (the full Verifier will then report it).
bool peek_schema_version(const uint8_t* data, size_t size, uint32_t* major, uint32_t* minor) {
  flatbuffers::Verifier::Options opts;
  opts.max_depth = kMaxDepth;
  opts.max_tables = 16;
  flatbuffers::Verifier v(data, size, opts);
  if (!v.Verify<flatbuffers::uoffset_t>(0)) return false;
  const flatbuffers::uoffset_t root_off = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(data);
  if (root_off >= size) return false;
  const auto* root = reinterpret_cast<const flatbuffers::Table*>(data + root_off);
  if (!root->VerifyTableStart(v) || !root->VerifyOffset(v, fbs::Program::VT_SCHEMA_VERSION)) {
    return false;
  }
  const auto* sv = root->GetPointer<const flatbuffers::Table*>(fbs::Program::VT_SCHEMA_VERSION);
  if (sv == nullptr) return false;
  if (!sv->VerifyTableStart(v) ||
      !sv->VerifyField<uint32_t>(v, fbs::SchemaVersion::VT_MAJOR, 4) ||
      !sv->VerifyField<uint32_t>(v, fbs::SchemaVersion::VT_MINOR, 4)) {
    return false;
  }
  *major = sv->GetField<uint32_t>(fbs::SchemaVersion::VT_MAJOR, 0);
  *minor = sv->GetField<uint32_t>(fbs::SchemaVersion::VT_MINOR, 0);
  return true;
}

void check_schema_version(uint32_t major, uint32_t minor) {
  if (major != kSchemaMajor) {
    fail("schema version " + version_string(major, minor) + " is " +
         (major > kSchemaMajor ? "newer than" : "incompatible with") +
         " this reader's schema version " + version_string(kSchemaMajor, kSchemaMinor) +
         " (major versions must match; a higher minor is accepted)");
  }
}

/// Converts the verified FlatBuffer into the IR; `where_` names what is being converted.
///
/// Every string and vector copied out of the buffer, and every IR object made, is charged to a
/// byte budget (ArchiveLimits::decoded_bytes_for): the Verifier bounds how many tables a buffer
/// may visit, but not what K references to one shared L-byte string cost once copied (K·L).
/// Vectors of 8-byte scalars must be 8-byte aligned in the buffer (every FlatBuffers builder
/// aligns them; the Verifier checks only 4), so no misaligned load happens here or in the
/// object API's UnPack that Model::save runs on bytes this decoder accepted. Every union value
/// and nested table is checked for presence before use: the Verifier accepts a union whose
/// type is set and whose value is absent.
class Converter {
 public:
  Converter(uint64_t budget, BundledExamples examples) : budget_(budget), examples_(examples) {}

  Program convert(const fbs::Program& p) {
    Program out;
    out.schema_major = p.schema_version()->major();
    out.schema_minor = p.schema_version()->minor();
    if (const auto* pr = p.producer()) {
      out.producer = {str(pr->exporter_version()), str(pr->torch_version()),
                      str(pr->python_version()), str(pr->capture()),
                      pr->capture_device() != nullptr ? str(pr->capture_device()) : "cpu"};
    }
    if (const auto* ops = p.operators()) {
      for (flatbuffers::uoffset_t i = 0; i < ops->size(); ++i) {
        const auto* o = ops->Get(i);
        charge(sizeof(Operator));
        out.operators.push_back({str(o->name()), str(o->overload()), str(o->schema())});
      }
    }
    if (const auto* syms = p.symbols()) {
      for (const auto* s : *syms) {
        charge(sizeof(Symbol));
        out.symbols.push_back({str(s->name()), s->hint()});
      }
    }
    if (const auto* rcs = p.range_constraints()) {
      for (const auto* r : *rcs) {
        charge(sizeof(RangeConstraint));
        out.range_constraints.push_back({r->symbol(), r->min(), r->max()});
      }
    }
    if (const auto* ws = p.weights()) {
      for (flatbuffers::uoffset_t i = 0; i < ws->size(); ++i) {
        where_ = "weight " + std::to_string(i);
        out.weights.push_back(weight(*ws->Get(i)));
      }
    }
    if (const auto* gs = p.graphs()) {
      for (flatbuffers::uoffset_t i = 0; i < gs->size(); ++i) {
        out.graphs.push_back(graph(*gs->Get(i), i));
      }
    }
    const auto* exs = examples_ == BundledExamples::Decode ? p.examples() : nullptr;
    if (exs != nullptr) {
      for (flatbuffers::uoffset_t i = 0; i < exs->size(); ++i) {
        where_ = "example " + std::to_string(i);
        out.examples.push_back(example(*exs->Get(i)));
      }
    }
    if (const auto* md = p.metadata()) {
      for (const auto* kv : *md) {
        charge(64);  // a std::map node
        out.metadata.emplace(str(kv->key()), str(kv->value()));
      }
    }
    if (const auto* names = p.output_names()) {
      for (const auto* n : *names) {
        out.output_names.push_back(str(n));
      }
    }
    if (const auto* params = p.inputs()) {
      for (const auto* param : *params) {
        charge(sizeof(InputParam));
        out.inputs.push_back({str(param->name()), input_spec(param->spec(), 0)});
      }
    }
    return out;
  }

 private:
  std::string where_;
  const uint64_t budget_;
  const BundledExamples examples_;
  uint64_t used_ = 0;

  [[noreturn]] void bad(const std::string& what) const { fail(where_ + ": " + what); }

  /// Counts `bytes` against the decode budget.
  void charge(uint64_t bytes) {
    if (__builtin_add_overflow(used_, bytes, &used_) || used_ > budget_) {
      fail("decoding needs more than " + std::to_string(budget_) +
           " bytes (ArchiveLimits::max_decoded_bytes), at " + where_ +
           ": the program references the same strings or vectors from many tables, or is "
           "larger than this limit allows");
    }
  }

  /// Schema 1.6 InputSpec; absent: a Tensor. Nesting beyond kMaxInputSpecDepth is refused
  /// here, before the recursion could go deeper.
  InputSpec input_spec(const fbs::InputSpec* s, int depth) {
    InputSpec out;
    if (s == nullptr) return out;
    if (depth > static_cast<int>(kMaxInputSpecDepth)) {
      bad("an input's structure (InputSpec) nests more than " +
          std::to_string(kMaxInputSpecDepth) + " levels");
    }
    out.kind = static_cast<InputSpec::Kind>(s->kind());
    if (const auto* keys = s->keys()) {
      for (const auto* k : *keys) out.keys.push_back(str(k));
    }
    if (const auto* children = s->children()) {
      for (const auto* c : *children) {
        charge(sizeof(InputSpec));
        out.children.push_back(input_spec(c, depth + 1));
      }
    }
    return out;
  }

  std::string str(const flatbuffers::String* s) {
    if (s == nullptr) return std::string();
    charge(sizeof(std::string) + s->size());
    return std::string(s->c_str(), s->size());
  }

  template <typename T>
  std::vector<T> vec(const flatbuffers::Vector<T>* v) {
    if (v == nullptr) return std::vector<T>();
    const uint64_t bytes = static_cast<uint64_t>(v->size()) * sizeof(T);
    if (reinterpret_cast<uintptr_t>(v->Data()) % alignof(T) != 0) {
      bad("a vector of " + std::to_string(sizeof(T)) + "-byte elements is not " +
          std::to_string(alignof(T)) + "-byte aligned in the buffer");
    }
    charge(sizeof(std::vector<T>) + bytes);
    std::vector<T> out(v->size());
    if (bytes != 0) std::memcpy(out.data(), v->Data(), static_cast<size_t>(bytes));
    return out;
  }

  std::vector<bool> bools(const flatbuffers::Vector<uint8_t>* v) {
    std::vector<bool> out;
    if (v == nullptr) return out;
    charge(sizeof(out) + v->size() / 8 + 1);
    out.reserve(v->size());
    for (uint8_t b : *v) out.push_back(b != 0);
    return out;
  }


  c10::ScalarType dtype(fbs::ScalarType t) {
    const int v = static_cast<int>(t);
    if (v < 0 || v > static_cast<int>(fbs::ScalarType::BFloat16)) {
      bad("unknown dtype (ScalarType " + std::to_string(v) + ")");
    }
    return static_cast<c10::ScalarType>(v);  // numbering equals c10's (schema/pt2rt.fbs)
  }

  c10::Layout layout(fbs::Layout l) {
    const int v = static_cast<int>(l);
    if (v < 0 || v > static_cast<int>(fbs::Layout::Mkldnn)) {
      bad("unknown layout " + std::to_string(v));
    }
    return static_cast<c10::Layout>(v);
  }

  c10::MemoryFormat memory_format(fbs::MemoryFormat m) {
    const int v = static_cast<int>(m);
    if (v < 0 || v > static_cast<int>(fbs::MemoryFormat::ChannelsLast3d)) {
      bad("unknown memory format " + std::to_string(v));
    }
    return static_cast<c10::MemoryFormat>(v);
  }

  c10::Device device(const fbs::Device* d) {
    if (d == nullptr) return c10::Device(c10::DeviceType::CPU);
    const std::string type = str(d->type());
    const int32_t index = d->index();
    if (index < -1 || index > 127) bad("device index " + std::to_string(index) + " out of range");
    try {
      c10::Device dev(type);  // parses "cpu", "cuda", "meta", ... (c10::Device(string))
      if (dev.has_index()) bad("device type " + type + " must not carry an index");
      if (index >= 0) dev.set_index(static_cast<c10::DeviceIndex>(index));
      return dev;
    } catch (const c10::Error&) {
      bad("invalid device '" + type.substr(0, 32) + "' index " + std::to_string(index));
    }
  }

  SymExpr sym_expr(const fbs::SymExpr& e) {
    charge(sizeof(SymExpr));
    SymExpr out;
    const int op = static_cast<int>(e.op());
    if (op < 0 || op > static_cast<int>(fbs::SymOp::Ge)) bad("unknown SymOp " + std::to_string(op));
    out.op = static_cast<SymOp>(op);
    out.value = e.value();
    out.symbol = e.symbol();
    if (const auto* ops = e.operands()) {
      for (const auto* o : *ops) out.operands.push_back(sym_expr(*o));
    }
    return out;
  }

  Dim dim(const fbs::Dim* d) {
    charge(sizeof(Dim));
    Dim out;
    if (d == nullptr) return out;
    out.value = d->value();
    if (d->expr() != nullptr) out.expr = sym_expr(*d->expr());
    return out;
  }

  std::vector<Dim> dims(const flatbuffers::Vector<flatbuffers::Offset<fbs::Dim>>* v) {
    std::vector<Dim> out;
    if (v != nullptr) {
      for (const auto* d : *v) out.push_back(dim(d));
    }
    return out;
  }

  TensorMeta meta(const fbs::TensorMeta& m) {
    TensorMeta out;
    out.dtype = dtype(m.dtype());
    out.sizes = dims(m.sizes());
    out.strides = dims(m.strides());
    out.storage_offset = dim(m.storage_offset());
    out.device = device(m.device());
    out.requires_grad = m.requires_grad();
    out.layout = layout(m.layout());
    return out;
  }

  Value value(const fbs::Value& v) {
    charge(sizeof(Value));
    Value out;
    out.name = str(v.name());
    const int kind = static_cast<int>(v.kind());
    if (kind < 0 || kind > static_cast<int>(fbs::ValueKind::OptionalTensorList)) {
      bad("value '" + out.name + "' has unknown kind " + std::to_string(kind));
    }
    out.kind = static_cast<ValueKind>(kind);
    if (v.meta() != nullptr) out.meta = meta(*v.meta());
    if (v.sym() != nullptr) out.sym = sym_expr(*v.sym());
    out.device_dependent_shape = v.device_dependent_shape();
    return out;
  }

  ArgumentValue argument_value(const fbs::Argument& a, const std::string& name) {
    using T = fbs::ArgumentValue;
    charge(sizeof(Argument));
    if (a.value_type() != T::NONE && a.value() == nullptr) {
      // The Verifier accepts a union whose type field is set and whose value is absent.
      const int kind = static_cast<int>(a.value_type());
      bad("argument '" + name + "' is a " +
          (kind <= static_cast<int>(T::MAX) ? fbs::EnumNameArgumentValue(a.value_type())
                                            : "union member " + std::to_string(kind)) +
          " without a value");
    }
    switch (a.value_type()) {
      case T::NONE:
        bad("argument '" + name + "' has no value");
      case T::NoneArg:
        return NoneArg{};
      case T::TensorRef:
        return TensorRef{a.value_as_TensorRef()->value()};
      case T::TensorListArg:
        return TensorListArg{vec(a.value_as_TensorListArg()->values())};
      case T::OptionalTensorListArg: {
        OptionalTensorListArg out;
        const std::vector<int32_t> ids = vec(a.value_as_OptionalTensorListArg()->values());
        charge(ids.size() * sizeof(int64_t));
        out.values.assign(ids.begin(), ids.end());
        return out;
      }
      case T::TensorListRef:
        return TensorListRef{a.value_as_TensorListRef()->value()};
      case T::IntArg:
        return ArgumentValue(std::in_place_type<int64_t>, a.value_as_IntArg()->value());
      case T::IntListArg:
        return IntListArg{vec(a.value_as_IntListArg()->values())};
      case T::SymIntRef:
        return SymIntRef{a.value_as_SymIntRef()->value()};
      case T::SymIntListArg: {
        const auto* s = a.value_as_SymIntListArg();
        SymIntListArg out;
        out.values = vec(s->values());
        out.is_ref = bools(s->is_ref());
        if (out.is_ref.empty()) out.is_ref.assign(out.values.size(), false);
        if (out.is_ref.size() != out.values.size()) {
          bad("argument '" + name + "': SymInt list has " + std::to_string(out.values.size()) +
              " values but " + std::to_string(out.is_ref.size()) + " is_ref flags");
        }
        return out;
      }
      case T::FloatArg:
        return ArgumentValue(std::in_place_type<double>, a.value_as_FloatArg()->value());
      case T::FloatListArg:
        return FloatListArg{vec(a.value_as_FloatListArg()->values())};
      case T::BoolArg:
        return ArgumentValue(std::in_place_type<bool>, a.value_as_BoolArg()->value());
      case T::BoolListArg: {
        return BoolListArg{bools(a.value_as_BoolListArg()->values())};
      }
      case T::StringArg:
        return ArgumentValue(std::in_place_type<std::string>, str(a.value_as_StringArg()->value()));
      case T::ScalarArg: {
        const auto* s = a.value_as_ScalarArg();
        switch (s->kind()) {
          case fbs::ScalarKind::Int: return c10::Scalar(s->int_value());
          case fbs::ScalarKind::Float: return c10::Scalar(s->float_value());
          case fbs::ScalarKind::Bool: return c10::Scalar(s->bool_value());
          case fbs::ScalarKind::Complex:
            return c10::Scalar(c10::complex<double>(s->float_value(), s->imag_value()));
        }
        bad("argument '" + name + "': unknown Scalar kind " +
            std::to_string(static_cast<int>(s->kind())));
      }
      case T::ScalarTypeArg:
        return dtype(a.value_as_ScalarTypeArg()->value());
      case T::LayoutArg:
        return layout(a.value_as_LayoutArg()->value());
      case T::MemoryFormatArg:
        return memory_format(a.value_as_MemoryFormatArg()->value());
      case T::DeviceArg:
        return device(a.value_as_DeviceArg()->value());
      case T::SymFloatRef:
        return SymFloatRef{a.value_as_SymFloatRef()->value()};
      case T::SymBoolRef:
        return SymBoolRef{a.value_as_SymBoolRef()->value()};
    }
    bad("argument '" + name + "' has unknown kind " +
        std::to_string(static_cast<int>(a.value_type())) + " (written by a newer pt2rt?)");
  }

  InputDescriptor input_descriptor(const fbs::InputDescriptor& d) {
    charge(sizeof(InputDescriptor) + 32);  // + the shared_ptr control block of a nested one
    InputDescriptor out;
    const int kind = static_cast<int>(d.kind());
    if (kind > static_cast<int>(fbs::InputKind::Dummy)) {
      bad("unknown input descriptor kind " + std::to_string(kind));
    }
    out.kind = static_cast<InputKind>(kind);
    out.fqn = str(d.fqn());
    out.idx = d.idx();
    if (d.output() != nullptr) {
      out.output = std::make_shared<const OutputDescriptor>(output_descriptor(*d.output()));
    }
    if (d.base() != nullptr) {
      out.base = std::make_shared<const InputDescriptor>(input_descriptor(*d.base()));
    }
    out.attr = str(d.attr());
    return out;
  }

  OutputDescriptor output_descriptor(const fbs::OutputDescriptor& d) {
    charge(sizeof(OutputDescriptor) + 32);
    OutputDescriptor out;
    const int kind = static_cast<int>(d.kind());
    if (kind > static_cast<int>(fbs::OutputKind::SavedNoVcCheck)) {
      bad("unknown output descriptor kind " + std::to_string(kind));
    }
    out.kind = static_cast<OutputKind>(kind);
    out.idx = d.idx();
    if (d.of() != nullptr) {
      out.of = std::make_shared<const InputDescriptor>(input_descriptor(*d.of()));
    }
    if (d.base() != nullptr) {
      out.base = std::make_shared<const OutputDescriptor>(output_descriptor(*d.base()));
    }
    out.attr = str(d.attr());
    return out;
  }

  Graph graph(const fbs::Graph& g, flatbuffers::uoffset_t gi) {
    Graph out;
    const int role = static_cast<int>(g.role());
    where_ = "graph " + std::to_string(gi);
    if (role > static_cast<int>(fbs::GraphRole::Joint)) bad("unknown role " + std::to_string(role));
    out.role = static_cast<GraphRole>(role);
    const std::string gname = std::string("graph '") + to_string(out.role) + "'";
    where_ = gname;
    if (const auto* vs = g.values()) {
      for (const auto* v : *vs) out.values.push_back(value(*v));
    }
    if (const auto* ns = g.nodes()) {
      for (flatbuffers::uoffset_t i = 0; i < ns->size(); ++i) {
        const auto* n = ns->Get(i);
        charge(sizeof(Node));
        Node node;
        node.op = n->op();
        if (const auto* d = n->debug()) {
          node.debug.fx_name = str(d->fx_name());
          node.debug.module_fqn = str(d->module_fqn());
          if (const auto* st = d->nn_module_stack()) {
            for (const auto* s : *st) {
              charge(sizeof(std::string));
              node.debug.nn_module_stack.push_back(str(s));
            }
          }
          node.debug.stack_trace = str(d->stack_trace());
        }
        where_ = gname + ", node " + std::to_string(i) + " '" + node.debug.fx_name + "'";
        if (const auto* as = n->args()) {
          for (const auto* a : *as) {
            Argument arg;
            arg.name = str(a->name());
            arg.kwarg_only = a->kwarg_only();
            arg.value = argument_value(*a, arg.name);
            node.args.push_back(std::move(arg));
          }
        }
        node.outputs = vec(n->outputs());
        out.nodes.push_back(std::move(node));
      }
    }
    where_ = gname;
    if (const auto* ins = g.inputs()) {
      for (flatbuffers::uoffset_t i = 0; i < ins->size(); ++i) {
        const auto* in = ins->Get(i);
        if (in->descriptor() == nullptr) bad("input " + std::to_string(i) + " has no descriptor");
        charge(sizeof(GraphInput));
        out.inputs.push_back({in->value(), input_descriptor(*in->descriptor())});
      }
    }
    if (const auto* outs = g.outputs()) {
      for (flatbuffers::uoffset_t i = 0; i < outs->size(); ++i) {
        const auto* o = outs->Get(i);
        if (o->descriptor() == nullptr) bad("output " + std::to_string(i) + " has no descriptor");
        charge(sizeof(GraphOutput));
        out.outputs.push_back({o->value(), output_descriptor(*o->descriptor())});
      }
    }
    return out;
  }

  WeightInfo weight(const fbs::Weight& w) {
    charge(sizeof(WeightInfo));
    WeightInfo out;
    out.fqn = str(w.fqn());
    where_ += " '" + out.fqn + "'";
    const int kind = static_cast<int>(w.kind());
    if (kind > static_cast<int>(fbs::WeightKind::Constant)) bad("unknown kind " + std::to_string(kind));
    out.kind = static_cast<WeightKind>(kind);
    out.persistent = w.persistent();
    out.dtype = dtype(w.dtype());
    out.sizes = vec(w.sizes());
    out.strides = vec(w.strides());
    out.storage_offset = w.storage_offset();
    out.requires_grad = w.requires_grad();
    out.entry = str(w.entry());
    out.byte_length = w.byte_length();
    return out;
  }

  TensorData tensor_data(const fbs::TensorData* t) {
    TensorData out;
    if (t == nullptr) bad("missing tensor");
    charge(sizeof(TensorData));
    out.dtype = dtype(t->dtype());
    out.sizes = vec(t->sizes());
    out.data = vec(t->data());
    out.float64_rmse = t->float64_rmse();
    return out;
  }

  std::vector<TensorData> tensors(
      const flatbuffers::Vector<flatbuffers::Offset<fbs::TensorData>>* v) {
    std::vector<TensorData> out;
    if (v != nullptr) {
      for (const auto* t : *v) out.push_back(tensor_data(t));
    }
    return out;
  }

  std::vector<std::pair<std::string, TensorData>> named(
      const flatbuffers::Vector<flatbuffers::Offset<fbs::NamedTensor>>* v) {
    std::vector<std::pair<std::string, TensorData>> out;
    if (v != nullptr) {
      for (const auto* t : *v) {
        charge(sizeof(std::string));
        out.emplace_back(str(t->name()), tensor_data(t->tensor()));
      }
    }
    return out;
  }

  /// A sketch and, one level down, its float64 sketch (a float64 sketch's own `float64` is
  /// not read).
  GradSketch grad_sketch(const fbs::GradSketch* s, bool with_float64 = true) {
    if (s == nullptr) bad("missing gradient sketch");
    charge(sizeof(GradSketch));
    GradSketch out;
    out.name = str(s->name());
    out.dtype = dtype(s->dtype());
    out.sizes = vec(s->sizes());
    out.norm = s->norm();
    out.sum = s->sum();
    out.abs_sum = s->abs_sum();
    out.max_abs = s->max_abs();
    out.projections = vec(s->projections());
    out.float64_rmse = s->float64_rmse();
    if (with_float64 && s->float64() != nullptr) {
      out.float64 = std::make_shared<const GradSketch>(grad_sketch(s->float64(), false));
    }
    return out;
  }

  Example example(const fbs::Example& e) {
    charge(sizeof(Example));
    Example out;
    out.name = str(e.name());
    out.inputs = tensors(e.inputs());
    if (const auto* r = e.references()) {
      charge(sizeof(ExampleReferences));
      ExampleReferences refs;
      refs.outputs = tensors(r->outputs());
      refs.train_outputs = tensors(r->train_outputs());
      refs.grad_outputs = tensors(r->grad_outputs());
      refs.grads = named(r->grads());
      refs.buffers = named(r->buffers());
      refs.grad_sketch_seed = r->grad_sketch_seed();
      if (const auto* v = r->grad_sketches()) {
        for (const auto* s : *v) refs.grad_sketches.push_back(grad_sketch(s));
      }
      out.references = std::move(refs);
    }
    return out;
  }
};

}  // namespace

namespace {

/// Archives before schema 1.5 do not mark results whose shape depends on the device; their
/// exporters wrote the same ops as now, so the marks are derived as the exporter sets them
/// (exporter/pt2rt/capture/portability.py, device_dependent_results): results 1 and 2 (save_mean,
/// save_invstd) of an eval-mode `native_batch_norm` (argument `training` a false constant)
/// and of `_native_batch_norm_legit_no_training`; results 1 and 3 (offset2bag, max_indices)
/// of `_embedding_bag` and `_embedding_bag_forward_only`.
void mark_device_dependent_shapes(Program& program) {
  for (Graph& g : program.graphs) {
    for (const Node& node : g.nodes) {
      const std::string& op = program.operators[node.op].name;
      std::vector<size_t> results;
      if (op == "aten::native_batch_norm") {
        const bool eval = node.args.size() > 5 && node.args[5].name == "training" &&
                          std::holds_alternative<bool>(node.args[5].value) &&
                          !std::get<bool>(node.args[5].value);
        if (eval) results = {1, 2};
      } else if (op == "aten::_native_batch_norm_legit_no_training") {
        results = {1, 2};
      } else if (op == "aten::_embedding_bag" || op == "aten::_embedding_bag_forward_only") {
        results = {1, 3};
      }
      for (size_t k : results) {
        if (k < node.outputs.size()) g.values[node.outputs[k]].device_dependent_shape = true;
      }
    }
  }
}

std::shared_ptr<Program> decode(const uint8_t* data, size_t size, const ArchiveLimits& limits,
                                BundledExamples examples) {
  if (data == nullptr || size < kMinBufferSize) {
    fail(std::to_string(size) + " bytes is too small for a FlatBuffer (minimum " +
         std::to_string(kMinBufferSize) + ")");
  }
  if (size > limits.max_program_bytes) {
    fail(std::to_string(size) + " bytes is more than the limit of " +
         std::to_string(limits.max_program_bytes) + " (ArchiveLimits::max_program_bytes)");
  }
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE) {
    fail(std::to_string(size) + " bytes is larger than a FlatBuffer can be (" +
         std::to_string(FLATBUFFERS_MAX_BUFFER_SIZE) + ")");
  }
  // Scalars are read in place: give the buffer 16-byte alignment when the caller did not.
  std::unique_ptr<uint64_t[]> aligned;
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
    aligned.reset(new uint64_t[(size + 7) / 8 + 1]);
    std::memcpy(aligned.get(), data, size);
    data = reinterpret_cast<const uint8_t*>(aligned.get());
  }
  if (!flatbuffers::BufferHasIdentifier(data, kProgramIdentifier)) {
    std::string found;
    for (size_t i = 4; i < 8; ++i) {
      const char c = static_cast<char>(data[i]);
      found += (c >= 0x20 && c < 0x7f) ? std::string(1, c) : "?";
    }
    fail("file identifier is '" + found + "', expected '" + kProgramIdentifier +
         "' (not a pt2rt program, or one from an incompatible schema major version)");
  }
  uint32_t major = 0, minor = 0;
  const bool peeked = peek_schema_version(data, size, &major, &minor);
  if (peeked) check_schema_version(major, minor);

  flatbuffers::Verifier::Options opts;
  opts.max_depth = kMaxDepth;
  opts.max_tables = max_tables_for(size);
  flatbuffers::Verifier verifier(data, size, opts);
  if (!fbs::VerifyProgramBuffer(verifier)) {
    fail("FlatBuffers verification failed (" + std::to_string(size) +
         " bytes; limits: depth " + std::to_string(kMaxDepth) + ", tables " +
         std::to_string(opts.max_tables) + "): the program is corrupt or truncated");
  }
  const fbs::Program* root = fbs::GetProgram(data);
  if (root->schema_version() == nullptr) fail("schema_version is missing");
  if (!peeked) check_schema_version(root->schema_version()->major(), root->schema_version()->minor());

  auto program = std::make_shared<Program>(
      Converter(limits.decoded_bytes_for(size), examples).convert(*root));
  validate_program(*program);
  if (program->schema_minor < 5) mark_device_dependent_shapes(*program);
  return program;
}

}  // namespace

std::shared_ptr<const Program> decode_program(const uint8_t* data, size_t size,
                                              const ArchiveLimits& limits,
                                              BundledExamples examples) {
  return decode(data, size, limits, examples);
}

namespace {

/// program.fb's entry checks: STORED, at most the program limit. Returns that limit.
uint64_t check_program_entry(const Archive& archive, const ArchiveLimits& limits) {
  const EntryInfo& e = archive.entry(kProgramEntry);
  if (!e.stored) {
    throw FormatError(archive.source() + ": entry '" + kProgramEntry + "' is compressed (method " +
                      std::to_string(e.method) + "); every entry of a pt2rt archive is STORED");
  }
  const uint64_t limit = std::min<uint64_t>(limits.max_program_bytes, FLATBUFFERS_MAX_BUFFER_SIZE - 1);
  if (e.size > limit) {
    throw FormatError(archive.source() + ": entry '" + kProgramEntry + "' is " +
                      std::to_string(e.size) + " bytes, more than the limit of " +
                      std::to_string(limit) + " (ArchiveLimits::max_program_bytes)");
  }
  return limit;
}

}  // namespace

std::vector<uint8_t> read_program_bytes(const Archive& archive, const ArchiveLimits& limits) {
  return archive.read(kProgramEntry, check_program_entry(archive, limits));
}

namespace {

std::shared_ptr<Program> read_and_decode(const Archive& archive, const ArchiveLimits& limits,
                                         BundledExamples examples) {
  std::vector<uint8_t> bytes;
  const uint8_t* data = nullptr;
  size_t size = 0;
  if (archive.mapping()) {
    // The entry checks of read_program_bytes, then the program is decoded in place.
    check_program_entry(archive, limits);
    data = archive.mapped_entry(kProgramEntry);
    size = static_cast<size_t>(archive.entry(kProgramEntry).size);
  } else {
    bytes = read_program_bytes(archive, limits);
    data = bytes.data();
    size = bytes.size();
  }
  try {
    return decode(data, size, limits, examples);
  } catch (const FormatError& err) {
    throw FormatError(archive.source() + ": " + err.message());
  }
}

}  // namespace

std::shared_ptr<const Program> read_program(const Archive& archive, const ArchiveLimits& limits,
                                            BundledExamples examples) {
  return read_and_decode(archive, limits, examples);
}

std::vector<Example> read_examples(const Archive& archive, const ArchiveLimits& limits) {
  return std::move(read_and_decode(archive, limits, BundledExamples::Decode)->examples);
}

}  // namespace pt2rt
