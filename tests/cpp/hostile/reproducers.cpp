// tests/cpp/hostile/reproducers.cpp — see reproducers.h.
#include "reproducers.h"

#include <flatbuffers/flatbuffers.h>

#include <cstring>
#include <functional>
#include <stdexcept>

#include "fixture.h"
#include "pt2rt/constants.h"

namespace pt2rt::test {
namespace {

// --- object-API pieces ------------------------------------------------------------------------

std::unique_ptr<fbs::ProgramT> empty_program() {
  auto p = std::make_unique<fbs::ProgramT>();
  p->schema_version = std::make_unique<fbs::SchemaVersionT>();
  p->schema_version->major = kSchemaMajor;
  p->schema_version->minor = kSchemaMinor;
  p->producer = std::make_unique<fbs::ProducerT>();
  p->producer->torch_version = "reproducer";
  return p;
}

uint32_t add_op(fbs::ProgramT& p, const std::string& name, const std::string& overload = "") {
  auto o = std::make_unique<fbs::OperatorT>();
  o->name = name;
  o->overload = overload;
  p.operators.push_back(std::move(o));
  return static_cast<uint32_t>(p.operators.size() - 1);
}

template <typename T>
std::unique_ptr<fbs::ArgumentT> arg(const std::string& name, T value, bool kwarg_only = false) {
  auto a = std::make_unique<fbs::ArgumentT>();
  a->name = name;
  a->kwarg_only = kwarg_only;
  a->value.Set(std::move(value));
  return a;
}
/// An argument of union member T with T::value = v (IntArgT, BoolArgT, StringArgT, ...).
template <typename T, typename V>
std::unique_ptr<fbs::ArgumentT> one(const std::string& name, V v, bool kwarg_only = false) {
  T a;
  a.value = std::move(v);
  return arg(name, std::move(a), kwarg_only);
}
/// An argument of list member T with T::values = v (IntListArgT, TensorListArgT, ...).
template <typename T, typename V>
std::unique_ptr<fbs::ArgumentT> many(const std::string& name, std::vector<V> v) {
  T a;
  a.values = std::move(v);
  return arg(name, std::move(a));
}
auto int_arg = [](const std::string& n, int64_t v) { return one<fbs::IntArgT>(n, v); };
auto ints_arg = [](const std::string& n, std::vector<int64_t> v) { return many<fbs::IntListArgT>(n, std::move(v)); };
auto bool_arg = [](const std::string& n, bool v) { return one<fbs::BoolArgT>(n, v); };
auto str_arg = [](const std::string& n, const std::string& v) { return one<fbs::StringArgT>(n, v); };
auto sym_ref = [](const std::string& n, uint32_t id) { return one<fbs::SymIntRefT>(n, id); };
auto tensors_arg = [](const std::string& n, std::vector<uint32_t> ids) { return many<fbs::TensorListArgT>(n, std::move(ids)); };
auto optional_tensors_arg = [](const std::string& n, std::vector<int32_t> ids) {
  return many<fbs::OptionalTensorListArgT>(n, std::move(ids));
};
std::unique_ptr<fbs::ArgumentT> dtype_kwarg(fbs::ScalarType t) {
  return one<fbs::ScalarTypeArgT>("dtype", t, /*kwarg_only=*/true);
}
std::unique_ptr<fbs::ArgumentT> scalar_int(const std::string& name, int64_t v) {
  fbs::ScalarArgT a;
  a.kind = fbs::ScalarKind::Int;
  a.int_value = v;
  return arg(name, a);
}
std::unique_ptr<fbs::ArgumentT> none_arg(const std::string& name) {
  return arg(name, fbs::NoneArgT{});
}

std::unique_ptr<fbs::ValueT> sym_value(const std::string& name) {
  auto v = std::make_unique<fbs::ValueT>();
  v->name = name;
  v->kind = fbs::ValueKind::SymInt;
  return v;
}

/// A graph under construction: values and nodes appended in order.
struct GraphMaker {
  fbs::ProgramT& p;
  fbs::GraphT* g;

  GraphMaker(fbs::ProgramT& program, fbs::GraphRole role) : p(program) {
    auto graph = std::make_unique<fbs::GraphT>();
    graph->role = role;
    g = graph.get();
    p.graphs.push_back(std::move(graph));
  }
  uint32_t value(std::unique_ptr<fbs::ValueT> v) {
    g->values.push_back(std::move(v));
    return static_cast<uint32_t>(g->values.size() - 1);
  }
  uint32_t plain_input(const std::string& name, fbs::ScalarType dtype, std::vector<int64_t> sizes) {
    const uint32_t id = value(tensor_value(name, dtype, std::move(sizes)));
    int64_t idx = 0;
    for (const auto& in : g->inputs) idx += in->descriptor->kind == fbs::InputKind::Plain;
    g->inputs.push_back(input(id, in_desc(fbs::InputKind::Plain, "", idx)));
    return id;
  }
  /// One node with one output value `out`; returns the output's id.
  uint32_t call(uint32_t op, std::vector<std::unique_ptr<fbs::ArgumentT>> args,
                std::unique_ptr<fbs::ValueT> out) {
    const std::string name = out->name;
    const uint32_t id = value(std::move(out));
    g->nodes.push_back(node(op, name, std::move(args), {id}));
    return id;
  }
  void plain_output(uint32_t v) {
    int64_t idx = 0;
    for (const auto& o : g->outputs) idx += o->descriptor->kind == fbs::OutputKind::Plain;
    g->outputs.push_back(output(static_cast<int32_t>(v), out_desc(fbs::OutputKind::Plain, idx)));
  }
};

template <typename... T>
std::vector<std::unique_ptr<fbs::ArgumentT>> args(T... a) {
  std::vector<std::unique_ptr<fbs::ArgumentT>> v;
  (v.push_back(std::move(a)), ...);
  return v;
}

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

/// An archive of `program` (STORED, aligned) with `extra` entries after the program.
Bytes archive_of(const fbs::ProgramT& program, std::vector<RawEntry> extra = {}) {
  std::vector<RawEntry> e;
  e.push_back({kArchiveFormatEntry, text(kArchiveFormat)});
  e.push_back({kArchiveVersionEntry, text(kArchiveVersion)});
  e.push_back({kProgramEntry, pack(program)});
  for (RawEntry& x : extra) e.push_back(std::move(x));
  return build_aligned(e);
}

/// A bundled example with inputs only (no references): `export-cli verify` runs it.
void add_example(fbs::ProgramT& p, const std::vector<float>& x, std::vector<int64_t> sizes) {
  auto ex = std::make_unique<fbs::ExampleT>();
  ex->name = "example";
  auto t = std::make_unique<fbs::TensorDataT>();
  t->dtype = fbs::ScalarType::Float;
  t->sizes = std::move(sizes);
  t->data.resize(x.size() * sizeof(float));
  std::memcpy(t->data.data(), x.data(), t->data.size());
  ex->inputs.push_back(std::move(t));
  p.examples.push_back(std::move(ex));
}

/// x float32[2] -> relu -> output: a valid program without weights.
std::unique_ptr<fbs::ProgramT> relu_program() {
  auto p = empty_program();
  const uint32_t relu = add_op(*p, "aten::relu");
  GraphMaker g(*p, fbs::GraphRole::Inference);
  const uint32_t x = g.plain_input("x", fbs::ScalarType::Float, {2});
  g.plain_output(g.call(relu, args(tensor_arg("self", x)), tensor_value("relu", fbs::ScalarType::Float, {2})));
  return p;
}

/// Sets the uncompressed size that the local header and the central directory record of
/// entry `name` declare.
void declare_size(Bytes& zip, const std::string& name, uint32_t size) {
  auto u16 = [&](size_t p) { return static_cast<size_t>(zip[p] | (zip[p + 1] << 8)); };
  auto put32 = [&](size_t p, uint32_t v) {
    for (int i = 0; i < 4; ++i) zip[p + i] = static_cast<uint8_t>(v >> (8 * i));
  };
  size_t patched = 0;
  for (size_t p = 0; p + 46 <= zip.size(); ++p) {
    if (zip[p] != 'P' || zip[p + 1] != 'K') continue;
    if (zip[p + 2] == 3 && zip[p + 3] == 4 && p + 30 + u16(p + 26) <= zip.size() &&
        std::memcmp(&zip[p + 30], name.data(), name.size()) == 0 && u16(p + 26) == name.size()) {
      put32(p + 22, size);
      ++patched;
    } else if (zip[p + 2] == 1 && zip[p + 3] == 2 && p + 46 + u16(p + 28) <= zip.size() &&
               u16(p + 28) == name.size() && std::memcmp(&zip[p + 46], name.data(), name.size()) == 0) {
      put32(p + 24, size);
      ++patched;
    }
  }
  if (patched != 2) throw std::logic_error("declare_size: entry '" + name + "' not found");
}

// --- raw-builder pieces (for what the object API cannot express) --------------------------------

flatbuffers::Offset<fbs::TensorMeta> raw_meta(flatbuffers::FlatBufferBuilder& b,
                                              const std::vector<int64_t>& sizes) {
  std::vector<flatbuffers::Offset<fbs::Dim>> s, st;
  int64_t stride = 1;
  std::vector<int64_t> strides(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i];
  }
  for (int64_t v : sizes) s.push_back(fbs::CreateDim(b, v));
  for (int64_t v : strides) st.push_back(fbs::CreateDim(b, v));
  return fbs::CreateTensorMeta(b, fbs::ScalarType::Float, b.CreateVector(s), b.CreateVector(st),
                               fbs::CreateDim(b, int64_t{0}), fbs::CreateDeviceDirect(b, "cpu", -1));
}

/// Program: one inference graph x [in] -> node(op, `argument`) -> y [out].
Bytes raw_one_node_program(const char* op_name, const std::vector<int64_t>& in,
                           const std::vector<int64_t>& out,
                           const std::function<std::vector<flatbuffers::Offset<fbs::Argument>>(
                               flatbuffers::FlatBufferBuilder&)>& make_args) {
  flatbuffers::FlatBufferBuilder b;
  std::vector<flatbuffers::Offset<fbs::Operator>> ops = {fbs::CreateOperatorDirect(b, op_name, "")};
  const std::vector<flatbuffers::Offset<fbs::Argument>> node_args = make_args(b);
  const std::vector<uint32_t> node_out = {1};
  std::vector<flatbuffers::Offset<fbs::Node>> nodes = {fbs::CreateNodeDirect(b, 0, &node_args, &node_out)};
  std::vector<flatbuffers::Offset<fbs::Value>> values = {
      fbs::CreateValueDirect(b, "x", fbs::ValueKind::Tensor, raw_meta(b, in)),
      fbs::CreateValueDirect(b, "y", fbs::ValueKind::Tensor, raw_meta(b, out))};
  std::vector<flatbuffers::Offset<fbs::GraphInput>> inputs = {
      fbs::CreateGraphInput(b, 0, fbs::CreateInputDescriptor(b, fbs::InputKind::Plain))};
  std::vector<flatbuffers::Offset<fbs::GraphOutput>> outputs = {
      fbs::CreateGraphOutput(b, 1, fbs::CreateOutputDescriptor(b, fbs::OutputKind::Plain))};
  std::vector<flatbuffers::Offset<fbs::Graph>> graphs = {
      fbs::CreateGraphDirect(b, fbs::GraphRole::Inference, &values, &nodes, &inputs, &outputs)};
  fbs::FinishProgramBuffer(
      b, fbs::CreateProgramDirect(b, fbs::CreateSchemaVersion(b, kSchemaMajor, kSchemaMinor), 0,
                                  &ops, &graphs));
  return Bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

}  // namespace

Bytes from_file_fill_archive(const std::string& path, int64_t n) {
  auto p = empty_program();
  const uint32_t from_file = add_op(*p, "aten::from_file");
  const uint32_t fill = add_op(*p, "aten::fill_", "Scalar");
  GraphMaker g(*p, fbs::GraphRole::Inference);
  const uint32_t t = g.call(from_file,
                            args(str_arg("filename", path), bool_arg("shared", true),
                                 int_arg("size", n), dtype_kwarg(fbs::ScalarType::Byte)),
                            tensor_value("t", fbs::ScalarType::Byte, {n}));
  g.plain_output(g.call(fill, args(tensor_arg("self", t), scalar_int("value", 'A')),
                        tensor_value("filled", fbs::ScalarType::Byte, {n})));
  return archive_of(*p);
}

Bytes absent_union_program() {
  return raw_one_node_program("aten::relu", {2}, {2}, [](flatbuffers::FlatBufferBuilder& b) {
    // value_type says TensorRef, the value offset is absent.
    return std::vector<flatbuffers::Offset<fbs::Argument>>{fbs::CreateArgument(
        b, b.CreateString("self"), fbs::ArgumentValue::TensorRef, flatbuffers::Offset<void>())};
  });
}

Bytes sym_arith_archive(const std::string& op, int64_t a, int64_t b) {
  auto p = empty_program();
  const uint32_t sym = add_op(*p, "sym::" + op);
  const uint32_t mul = add_op(*p, "aten::mul", "Scalar");
  GraphMaker g(*p, fbs::GraphRole::Inference);
  const uint32_t x = g.plain_input("x", fbs::ScalarType::Float, {2});
  const uint32_t s = op == "neg" ? g.call(sym, args(int_arg("a", a)), sym_value("s"))
                                 : g.call(sym, args(int_arg("a", a), int_arg("b", b)), sym_value("s"));
  g.plain_output(g.call(mul, args(tensor_arg("self", x), sym_ref("other", s)),
                        tensor_value("y", fbs::ScalarType::Float, {2})));
  return archive_of(*p);
}

Bytes deflate_program_archive(uint32_t declared) {
  Bytes zip = build_raw_zip({{kArchiveFormatEntry, text(kArchiveFormat)},
                             {kArchiveVersionEntry, text(kArchiveVersion)},
                             {kProgramEntry, text("PT2R....program"), /*deflate=*/true}});
  declare_size(zip, kProgramEntry, declared);
  return zip;
}

Bytes deflated_fixture_archive() {
  return build_raw_zip({{kArchiveFormatEntry, text(kArchiveFormat)},
                        {kArchiveVersionEntry, text(kArchiveVersion)},
                        {kProgramEntry, pack(*relu_program()), /*deflate=*/true}});
}

Bytes shared_string_program(uint32_t refs, uint32_t len) {
  flatbuffers::FlatBufferBuilder b;
  const auto shared = b.CreateString(std::string(len, 's'));
  std::vector<flatbuffers::Offset<fbs::Value>> values;
  values.reserve(refs);
  for (uint32_t i = 0; i < refs; ++i) {
    values.push_back(fbs::CreateValue(b, shared, fbs::ValueKind::None));
  }
  std::vector<flatbuffers::Offset<fbs::Graph>> graphs = {
      fbs::CreateGraphDirect(b, fbs::GraphRole::Inference, &values)};
  fbs::FinishProgramBuffer(
      b, fbs::CreateProgramDirect(b, fbs::CreateSchemaVersion(b, kSchemaMajor, kSchemaMinor), 0,
                                  nullptr, &graphs));
  return Bytes(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

Bytes many_mutations_program(uint32_t n) {
  auto p = empty_program();
  for (uint32_t i = 0; i < n; ++i) {
    auto w = std::make_unique<fbs::WeightT>();
    w->fqn = "p" + std::to_string(i);
    w->kind = fbs::WeightKind::Parameter;
    w->dtype = fbs::ScalarType::Float;
    w->requires_grad = true;
    w->entry = "weights/p" + std::to_string(i);
    w->byte_length = 4;
    p->weights.push_back(std::move(w));
  }
  for (uint32_t i = 0; i < n; ++i) {
    auto w = std::make_unique<fbs::WeightT>();
    w->fqn = "b" + std::to_string(i);
    w->kind = fbs::WeightKind::Buffer;
    w->dtype = fbs::ScalarType::Float;
    w->entry = "weights/b" + std::to_string(i);
    w->byte_length = 4;
    p->weights.push_back(std::move(w));
  }
  // inference and forward: Param p_i, Buffer b_i -> Plain(i) = p_i, InputMutation(b_i) = b_i.
  for (fbs::GraphRole role : {fbs::GraphRole::Inference, fbs::GraphRole::Forward}) {
    GraphMaker g(*p, role);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t v = g.value(tensor_value("p" + std::to_string(i), fbs::ScalarType::Float, {}));
      g.g->inputs.push_back(input(v, in_desc(fbs::InputKind::Param, "p" + std::to_string(i))));
    }
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t v = g.value(tensor_value("b" + std::to_string(i), fbs::ScalarType::Float, {}));
      g.g->inputs.push_back(input(v, in_desc(fbs::InputKind::Buffer, "b" + std::to_string(i))));
    }
    for (uint32_t i = 0; i < n; ++i) g.plain_output(i);
    for (uint32_t i = 0; i < n; ++i) {
      auto d = out_desc(fbs::OutputKind::InputMutation);
      d->of = in_desc(fbs::InputKind::Buffer, "b" + std::to_string(i));
      g.g->outputs.push_back(output(static_cast<int32_t>(n + i), std::move(d)));
    }
  }
  // backward: Tangent(Plain(i)) -> Grad(Param p_i).
  GraphMaker bw(*p, fbs::GraphRole::Backward);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t v = bw.value(tensor_value("t" + std::to_string(i), fbs::ScalarType::Float, {}));
    auto d = in_desc(fbs::InputKind::Tangent);
    d->output = out_desc(fbs::OutputKind::Plain, i);
    bw.g->inputs.push_back(input(v, std::move(d)));
    auto grad = out_desc(fbs::OutputKind::Grad);
    grad->of = in_desc(fbs::InputKind::Param, "p" + std::to_string(i));
    bw.g->outputs.push_back(output(static_cast<int32_t>(v), std::move(grad)));
  }
  return pack(*p);
}

Bytes misaligned_int64_program() {
  return raw_one_node_program("aten::view", {2, 3}, {6}, [](flatbuffers::FlatBufferBuilder& b) {
    // [int64] vector {6} laid out by hand so that its data starts 4 bytes past an 8-byte
    // boundary (FlatBufferBuilder itself always aligns it). Offsets count from the buffer's
    // end, whose size Finish() pads to a multiple of the largest alignment used (8).
    const int64_t six = 6;
    b.Align(8);
    if (b.GetSize() % 8 != 4) b.PushElement<uint32_t>(0);  // data will end 4 bytes off
    b.PushBytes(reinterpret_cast<const uint8_t*>(&six), sizeof(six));
    b.PushElement<flatbuffers::uoffset_t>(1);  // vector length
    const flatbuffers::Offset<flatbuffers::Vector<int64_t>> values(b.GetSize());
    const auto list = fbs::CreateIntListArg(b, values);
    return std::vector<flatbuffers::Offset<fbs::Argument>>{
        fbs::CreateArgument(b, b.CreateString("self"), fbs::ArgumentValue::TensorRef,
                            fbs::CreateTensorRef(b, uint32_t{0}).Union()),
        fbs::CreateArgument(b, b.CreateString("size"), fbs::ArgumentValue::IntListArg,
                            list.Union())};
  });
}

Bytes tangent_without_meta_archive() {
  auto p = make_program();
  for (auto& g : p->graphs) {
    if (g->role != fbs::GraphRole::Backward) continue;
    for (auto& in : g->inputs) {
      if (in->descriptor->kind == fbs::InputKind::Tangent) g->values[in->value]->meta.reset();
    }
  }
  return build_aligned(fixture_entries(*p));
}

Bytes extra_entry_archive(const std::string& name) {
  std::vector<RawEntry> e = fixture_entries(*make_program());
  e.push_back({name, text("not yours")});
  return build_aligned(e);
}

Bytes compressed_extra_archive(uint64_t zeros) {
  return build_raw_zip({{kArchiveFormatEntry, text(kArchiveFormat)},
                        {kArchiveVersionEntry, text(kArchiveVersion)},
                        {kProgramEntry, pack(*relu_program())},
                        {"extra/bomb", Bytes(zeros, 0), /*deflate=*/true}});
}

Bytes escape_text_archive() {
  auto p = relu_program();
  p->graphs[0]->values[0]->name = "x\x1b[2J\x1b[H";
  p->graphs[0]->nodes[0]->debug->fx_name = "relu\r\nOK: 99 checks match";
  p->graphs[0]->nodes[0]->debug->stack_trace = "File \"m.py\"\n\x1b[31mred\x07\x1b]0;title\x07";
  auto kv = std::make_unique<fbs::KeyValueT>();
  kv->key = "note\x1b[8m";
  kv->value = "\x1b]52;c;cHduZWQ=\x07 clipboard";
  p->metadata.push_back(std::move(kv));
  p->producer->torch_version = "1.13\x1b[1A";
  p->operators[0]->overload = "\x1b[5mblink";  // aten::relu.<ESC>[5mblink does not exist
  return archive_of(*p);
}

Bytes empty_name_zip() {
  Bytes z;
  auto u16 = [&](uint32_t v) { z.push_back(v & 0xff); z.push_back((v >> 8) & 0xff); };
  auto u32 = [&](uint32_t v) { u16(v & 0xffff); u16(v >> 16); };
  u32(0x04034b50); u16(10); u16(0); u16(0); u16(0); u16(0); u32(0); u32(0); u32(0); u16(0); u16(0);
  u32(0x02014b50); u16(0x031e); u16(10); u16(0); u16(0); u16(0); u16(0); u32(0); u32(0); u32(0);
  u16(0); u16(0); u16(0); u16(0); u16(0); u32(0); u32(0);
  u32(0x06054b50); u16(0); u16(0); u16(1); u16(1); u32(46); u32(30); u16(0);
  return z;
}

Bytes reshape_alias_archive(int64_t n) {
  auto p = empty_program();
  const uint32_t op = add_op(*p, "aten::_reshape_alias");
  GraphMaker g(*p, fbs::GraphRole::Inference);
  const uint32_t x = g.plain_input("x", fbs::ScalarType::Float, {2});
  g.plain_output(g.call(op, args(tensor_arg("self", x), ints_arg("size", {n}), ints_arg("stride", {1})),
                        tensor_value("view", fbs::ScalarType::Float, {n})));
  add_example(*p, {1, 2}, {2});
  return archive_of(*p);
}

std::vector<std::pair<std::string, Bytes>> run_bound_archives() {
  std::vector<std::pair<std::string, Bytes>> out;
  const auto F = fbs::ScalarType::Float;
  // Each: x float32[1] in; `body` adds nodes and returns the value to output.
  auto make = [&](const std::string& name, const std::function<uint32_t(fbs::ProgramT&, GraphMaker&, uint32_t)>& body) {
    auto p = empty_program();
    GraphMaker g(*p, fbs::GraphRole::Inference);
    const uint32_t x = g.plain_input("x", F, {1});
    g.plain_output(body(*p, g, x));
    add_example(*p, {1}, {1});
    out.emplace_back(name, archive_of(*p));
  };
  auto zeros = [&](fbs::ProgramT& p, GraphMaker& g, std::vector<int64_t> sizes) {
    const uint32_t op = add_op(p, "aten::zeros");
    return g.call(op, args(ints_arg("size", sizes), dtype_kwarg(F)), tensor_value("z", F, sizes));
  };
  make("zeros_1GiB", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t) {
    return zeros(p, g, {int64_t{1} << 28});
  });
  make("expand_clone_1GiB", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t x) {
    const uint32_t e = g.call(add_op(p, "aten::expand"), args(tensor_arg("self", x), ints_arg("size", {int64_t{1} << 28})),
                              tensor_value("e", F, {int64_t{1} << 28}));
    return g.call(add_op(p, "aten::clone"), args(tensor_arg("self", e)), tensor_value("c", F, {int64_t{1} << 28}));
  });
  make("repeat_1GiB", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t x) {
    return g.call(add_op(p, "aten::repeat"), args(tensor_arg("self", x), ints_arg("repeats", {int64_t{1} << 28})),
                  tensor_value("r", F, {int64_t{1} << 28}));
  });
  make("mm_chain", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t) {
    const uint32_t z = zeros(p, g, {512, 512});
    const uint32_t mm = add_op(p, "aten::mm");
    uint32_t v = z;
    for (int i = 0; i < 200; ++i) {
      v = g.call(mm, args(tensor_arg("self", v), tensor_arg("mat2", z)), tensor_value("mm", F, {512, 512}));
    }
    return v;
  });
  make("einsum_1024", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t) {
    const uint32_t z = zeros(p, g, {1024, 1024});
    return g.call(add_op(p, "aten::einsum"), args(str_arg("equation", "ij,jk->ik"), tensors_arg("tensors", {z, z})),
                  tensor_value("e", F, {1024, 1024}));
  });
  make("conv_big_kernel", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t) {
    const uint32_t in = zeros(p, g, {1, 1, 1024, 1024});
    const uint32_t w = zeros(p, g, {1, 1, 255, 255});
    return g.call(add_op(p, "aten::convolution"),
                  args(tensor_arg("input", in), tensor_arg("weight", w), none_arg("bias"), ints_arg("stride", {1, 1}),
                       ints_arg("padding", {0, 0}), ints_arg("dilation", {1, 1}), bool_arg("transposed", false),
                       ints_arg("output_padding", {0, 0}), int_arg("groups", 1)),
                  tensor_value("conv", F, {1, 1, 770, 770}));
  });
  make("max_pool_big_window", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t) {
    const uint32_t in = zeros(p, g, {1, 1, 1024, 1024});
    return g.call(add_op(p, "aten::max_pool2d"),
                  args(tensor_arg("self", in), ints_arg("kernel_size", {512, 512}), ints_arg("stride", {1, 1})),
                  tensor_value("pool", F, {1, 1, 513, 513}));
  });
  make("index_blowup", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t) {
    const uint32_t row = zeros(p, g, {1, 4096});
    const uint32_t arange = add_op(p, "aten::zeros");
    const uint32_t idx = g.call(arange, args(ints_arg("size", {65536}), dtype_kwarg(fbs::ScalarType::Long)),
                                tensor_value("idx", fbs::ScalarType::Long, {65536}));
    // Declares a 1-element result; the kernel would make [65536, 4096] (1 GiB).
    return g.call(add_op(p, "aten::index", "Tensor"),
                  args(tensor_arg("self", row), optional_tensors_arg("indices", {static_cast<int32_t>(idx)})),
                  tensor_value("gathered", F, {1}));
  });
  make("many_small_nodes", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t x) {
    const uint32_t add = add_op(p, "aten::add", "Tensor");
    uint32_t v = x;
    for (int i = 0; i < 3500; ++i) {
      v = g.call(add, args(tensor_arg("self", v), tensor_arg("other", x)), tensor_value("a", F, {1}));
    }
    return v;
  });
  make("many_compact_nodes", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t x) {
    // As many nodes as 1 MB holds: no debug info, no names, no declared metas.
    const uint32_t add = add_op(p, "aten::add", "Tensor");
    uint32_t v = x;
    for (int i = 0; i < 11000; ++i) {
      auto out = std::make_unique<fbs::ValueT>();
      out->kind = fbs::ValueKind::Tensor;
      const uint32_t id = g.value(std::move(out));
      auto n = std::make_unique<fbs::NodeT>();
      n->op = add;
      n->args = args(tensor_arg("", v), tensor_arg("", x));
      n->outputs = {id};
      g.g->nodes.push_back(std::move(n));
      v = id;
    }
    return v;
  });
  make("elementwise_at_bound", [&](fbs::ProgramT& p, GraphMaker& g, uint32_t) {
    // 2 Mi floats (8 MiB; three live: 24 MiB) and 30 adds: inside the default bounds.
    const uint32_t z = zeros(p, g, {int64_t{1} << 21});
    const uint32_t add = add_op(p, "aten::add", "Tensor");
    uint32_t v = z;
    for (int i = 0; i < 30; ++i) {
      v = g.call(add, args(tensor_arg("self", v), tensor_arg("other", z)), tensor_value("a", F, {int64_t{1} << 21}));
    }
    return v;
  });
  return out;
}

std::vector<std::pair<std::string, Bytes>> all_reproducers() {
  std::vector<std::pair<std::string, Bytes>> out = {
      {"from_file_fill.pt2", from_file_fill_archive("/etc/hostname", 4)},
      {"absent_union.fb", absent_union_program()},
      {"sym_floordiv_overflow.pt2", sym_arith_archive("floordiv", INT64_MIN, -1)},
      {"sym_mod_overflow.pt2", sym_arith_archive("mod", INT64_MIN, -1)},
      {"sym_mul_overflow.pt2", sym_arith_archive("mul", INT64_MAX, 2)},
      {"sym_neg_overflow.pt2", sym_arith_archive("neg", INT64_MIN, 0)},
      {"deflate_program_4g.pt2", deflate_program_archive(0xfffffff0u)},
      {"deflated_program.pt2", deflated_fixture_archive()},
      {"shared_string.fb", shared_string_program(256, 256)},
      {"many_mutations.fb", many_mutations_program(100)},
      {"misaligned_int64.fb", misaligned_int64_program()},
      {"tangent_without_meta.pt2", tangent_without_meta_archive()},
      {"traversal_name.pt2", extra_entry_archive("extra/../../etc/x")},
      {"compressed_extra.pt2", compressed_extra_archive(uint64_t{1} << 20)},
      {"escape_text.pt2", escape_text_archive()},
      {"empty_name.pt2", empty_name_zip()},
      {"reshape_alias_oob.pt2", reshape_alias_archive(1 << 20)},
      {"reshape_alias_view.pt2", reshape_alias_archive(2)},
  };
  for (auto& [name, bytes] : run_bound_archives()) out.emplace_back("run_bound_" + name + ".pt2", std::move(bytes));
  return out;
}

}  // namespace pt2rt::test
