// tests/cpp/loader/fixture.cpp — builds the fixture program and archives (see fixture.h).
#include "fixture.h"

#include <dirent.h>
#include <ftw.h>
#include <unistd.h>
#include <zip.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "pt2rt/archive.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/constants.h"
#include "pt2rt/program.h"
#include "pt2rt/weights.h"

namespace pt2rt::test {

std::unique_ptr<fbs::DimT> dim(int64_t v) {
  auto d = std::make_unique<fbs::DimT>();
  d->value = v;
  return d;
}

std::unique_ptr<fbs::ValueT> tensor_value(const std::string& name, fbs::ScalarType dtype,
                                          std::vector<int64_t> sizes) {
  auto v = std::make_unique<fbs::ValueT>();
  v->name = name;
  v->kind = fbs::ValueKind::Tensor;
  v->meta = std::make_unique<fbs::TensorMetaT>();
  v->meta->dtype = dtype;
  int64_t stride = 1;
  std::vector<int64_t> strides(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= sizes[i];
  }
  for (int64_t s : sizes) v->meta->sizes.push_back(dim(s));
  for (int64_t s : strides) v->meta->strides.push_back(dim(s));
  v->meta->storage_offset = dim(0);
  v->meta->device = std::make_unique<fbs::DeviceT>();
  v->meta->device->type = "cpu";
  return v;
}

std::unique_ptr<fbs::InputDescriptorT> in_desc(fbs::InputKind kind, const std::string& fqn,
                                               int64_t idx) {
  auto d = std::make_unique<fbs::InputDescriptorT>();
  d->kind = kind;
  d->fqn = fqn;
  d->idx = idx;
  return d;
}

std::unique_ptr<fbs::OutputDescriptorT> out_desc(fbs::OutputKind kind, int64_t idx) {
  auto d = std::make_unique<fbs::OutputDescriptorT>();
  d->kind = kind;
  d->idx = idx;
  return d;
}

std::unique_ptr<fbs::GraphInputT> input(uint32_t value, std::unique_ptr<fbs::InputDescriptorT> d) {
  auto in = std::make_unique<fbs::GraphInputT>();
  in->value = value;
  in->descriptor = std::move(d);
  return in;
}

std::unique_ptr<fbs::GraphOutputT> output(int32_t value, std::unique_ptr<fbs::OutputDescriptorT> d) {
  auto out = std::make_unique<fbs::GraphOutputT>();
  out->value = value;
  out->descriptor = std::move(d);
  return out;
}

std::unique_ptr<fbs::ArgumentT> tensor_arg(const std::string& name, uint32_t value) {
  auto a = std::make_unique<fbs::ArgumentT>();
  a->name = name;
  fbs::TensorRefT ref;
  ref.value = value;
  a->value.Set(ref);
  return a;
}

std::unique_ptr<fbs::NodeT> node(uint32_t op, const std::string& fx_name,
                                 std::vector<std::unique_ptr<fbs::ArgumentT>> args,
                                 std::vector<uint32_t> outputs) {
  auto n = std::make_unique<fbs::NodeT>();
  n->op = op;
  n->args = std::move(args);
  n->outputs = std::move(outputs);
  n->debug = std::make_unique<fbs::DebugInfoT>();
  n->debug->fx_name = fx_name;
  n->debug->stack_trace = "File \"model.py\", line 1, in forward";
  return n;
}

namespace {

template <typename... T>
std::vector<std::unique_ptr<fbs::ArgumentT>> args(T... a) {
  std::vector<std::unique_ptr<fbs::ArgumentT>> v;
  (v.push_back(std::move(a)), ...);
  return v;
}

std::unique_ptr<fbs::WeightT> weight(const std::string& fqn, fbs::WeightKind kind,
                                     fbs::ScalarType dtype, std::vector<int64_t> sizes,
                                     std::vector<int64_t> strides, bool requires_grad,
                                     const std::string& entry, uint64_t byte_length) {
  auto w = std::make_unique<fbs::WeightT>();
  w->fqn = fqn;
  w->kind = kind;
  w->dtype = dtype;
  w->sizes = std::move(sizes);
  w->strides = std::move(strides);
  w->requires_grad = requires_grad;
  w->entry = entry;
  w->byte_length = byte_length;
  return w;
}

std::unique_ptr<fbs::TensorDataT> tensor_data(const std::vector<float>& values,
                                              std::vector<int64_t> sizes) {
  auto t = std::make_unique<fbs::TensorDataT>();
  t->dtype = fbs::ScalarType::Float;
  t->sizes = std::move(sizes);
  t->data.resize(values.size() * sizeof(float));
  std::memcpy(t->data.data(), values.data(), t->data.size());
  return t;
}

// Inference and forward graphs share the inputs and the two nodes.
std::unique_ptr<fbs::GraphT> primal_graph(fbs::GraphRole role) {
  auto g = std::make_unique<fbs::GraphT>();
  g->role = role;
  g->values.push_back(tensor_value("w", fbs::ScalarType::Float, {2, 3}));       // 0
  g->values.push_back(tensor_value("frozen", fbs::ScalarType::Float, {3}));     // 1
  g->values.push_back(tensor_value("count", fbs::ScalarType::Long, {}));        // 2
  g->values.push_back(tensor_value("x", fbs::ScalarType::Float, {2, 3}));       // 3
  g->values.push_back(tensor_value("mul", fbs::ScalarType::Float, {2, 3}));     // 4
  g->values.push_back(tensor_value("relu", fbs::ScalarType::Float, {2, 3}));    // 5
  g->inputs.push_back(input(0, in_desc(fbs::InputKind::Param, "w")));
  g->inputs.push_back(input(1, in_desc(fbs::InputKind::Param, "frozen")));
  g->inputs.push_back(input(2, in_desc(fbs::InputKind::Buffer, "count")));
  g->inputs.push_back(input(3, in_desc(fbs::InputKind::Plain, "", 0)));
  g->nodes.push_back(node(0, "mul", args(tensor_arg("self", 3), tensor_arg("other", 0)), {4}));
  g->nodes.push_back(node(1, "relu", args(tensor_arg("self", 4)), {5}));
  g->outputs.push_back(output(5, out_desc(fbs::OutputKind::Plain, 0)));
  return g;
}

std::unique_ptr<fbs::GraphT> backward_graph() {
  auto g = std::make_unique<fbs::GraphT>();
  g->role = fbs::GraphRole::Backward;
  g->values.push_back(tensor_value("relu", fbs::ScalarType::Float, {2, 3}));        // 0
  g->values.push_back(tensor_value("x", fbs::ScalarType::Float, {2, 3}));           // 1
  g->values.push_back(tensor_value("tangents_1", fbs::ScalarType::Float, {2, 3}));  // 2
  g->values.push_back(tensor_value("threshold_backward", fbs::ScalarType::Float, {2, 3}));
  g->values.push_back(tensor_value("mul_1", fbs::ScalarType::Float, {2, 3}));       // 4
  g->inputs.push_back(input(0, in_desc(fbs::InputKind::Saved, "", 0)));
  g->inputs.push_back(input(1, in_desc(fbs::InputKind::Saved, "", 1)));
  auto tangent = in_desc(fbs::InputKind::Tangent);
  tangent->output = out_desc(fbs::OutputKind::Plain, 0);
  g->inputs.push_back(input(2, std::move(tangent)));
  auto threshold = std::make_unique<fbs::ArgumentT>();
  threshold->name = "threshold";
  fbs::ScalarArgT scalar;
  scalar.kind = fbs::ScalarKind::Int;
  scalar.int_value = 0;
  threshold->value.Set(scalar);
  g->nodes.push_back(node(2, "threshold_backward",
                          args(tensor_arg("grad_output", 2), tensor_arg("self", 0),
                               std::move(threshold)),
                          {3}));
  g->nodes.push_back(node(0, "mul_1", args(tensor_arg("self", 3), tensor_arg("other", 1)), {4}));
  auto grad = out_desc(fbs::OutputKind::Grad);
  grad->of = in_desc(fbs::InputKind::Param, "w");
  g->outputs.push_back(output(4, std::move(grad)));
  return g;
}

int rm_entry(const char* path, const struct stat*, int, struct FTW*) { return ::remove(path); }

}  // namespace

std::vector<float> fixture_w_values() { return {-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}; }

std::unique_ptr<fbs::ProgramT> make_program() {
  auto p = std::make_unique<fbs::ProgramT>();
  p->schema_version = std::make_unique<fbs::SchemaVersionT>();
  p->schema_version->major = kSchemaMajor;
  p->schema_version->minor = kSchemaMinor;
  p->producer = std::make_unique<fbs::ProducerT>();
  p->producer->exporter_version = "0.1.0";
  p->producer->torch_version = "1.13.1";
  p->producer->python_version = "3.11.2";
  p->producer->capture = "test-fixture";
  auto op = [](const std::string& name, const std::string& overload, const std::string& schema) {
    auto o = std::make_unique<fbs::OperatorT>();
    o->name = name;
    o->overload = overload;
    o->schema = schema;
    return o;
  };
  p->operators.push_back(op("aten::mul", "Tensor", "mul.Tensor(Tensor self, Tensor other) -> Tensor"));
  p->operators.push_back(op("aten::relu", "", "relu(Tensor self) -> Tensor"));
  p->operators.push_back(op("aten::threshold_backward", "",
                            "threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor"));
  p->weights.push_back(weight("w", fbs::WeightKind::Parameter, fbs::ScalarType::Float, {2, 3}, {3, 1},
                              true, "weights/0", 24));
  p->weights.push_back(weight("frozen", fbs::WeightKind::Parameter, fbs::ScalarType::Float, {3}, {1},
                              false, "weights/1", 12));
  p->weights.push_back(weight("count", fbs::WeightKind::Buffer, fbs::ScalarType::Long, {}, {}, false,
                              "weights/2", 8));
  p->graphs.push_back(primal_graph(fbs::GraphRole::Inference));
  auto fwd = primal_graph(fbs::GraphRole::Forward);
  fwd->outputs.push_back(output(5, out_desc(fbs::OutputKind::Saved, 0)));
  fwd->outputs.push_back(output(3, out_desc(fbs::OutputKind::Saved, 1)));
  p->graphs.push_back(std::move(fwd));
  p->graphs.push_back(backward_graph());

  auto ex = std::make_unique<fbs::ExampleT>();
  ex->name = "default";
  ex->inputs.push_back(tensor_data({1, 1, 1, 1, 1, 1}, {2, 3}));
  ex->references = std::make_unique<fbs::ExampleReferencesT>();
  ex->references->outputs.push_back(tensor_data({0, 0, 0, 0.5f, 1.5f, 2.5f}, {2, 3}));
  ex->references->train_outputs.push_back(tensor_data({0, 0, 0, 0.5f, 1.5f, 2.5f}, {2, 3}));
  ex->references->grad_outputs.push_back(tensor_data({1, 1, 1, 1, 1, 1}, {2, 3}));
  auto grad = std::make_unique<fbs::NamedTensorT>();
  grad->name = "w";
  grad->tensor = tensor_data({0, 0, 0, 1, 1, 1}, {2, 3});
  ex->references->grads.push_back(std::move(grad));
  p->examples.push_back(std::move(ex));

  auto kv = std::make_unique<fbs::KeyValueT>();
  kv->key = "model";
  kv->value = "fixture";
  p->metadata.push_back(std::move(kv));
  return p;
}

std::vector<uint8_t> pack(const fbs::ProgramT& program) {
  flatbuffers::FlatBufferBuilder fbb;
  fbs::FinishProgramBuffer(fbb, fbs::Program::Pack(fbb, &program));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

std::vector<uint8_t> fixture_weight_bytes(size_t i) {
  std::vector<uint8_t> out;
  if (i == 0) {
    const std::vector<float> w = fixture_w_values();
    out.resize(w.size() * sizeof(float));
    std::memcpy(out.data(), w.data(), out.size());
  } else if (i == 1) {
    const float f[3] = {10.f, 20.f, 30.f};
    out.resize(sizeof(f));
    std::memcpy(out.data(), f, sizeof(f));
  } else {
    const int64_t c = 7;
    out.resize(sizeof(c));
    std::memcpy(out.data(), &c, sizeof(c));
  }
  return out;
}

std::vector<RawEntry> fixture_entries(const fbs::ProgramT& program) {
  auto text = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  std::vector<RawEntry> e;
  e.push_back({kArchiveFormatEntry, text(kArchiveFormat)});
  e.push_back({kArchiveVersionEntry, text(kArchiveVersion)});
  e.push_back({kProgramEntry, pack(program)});
  for (size_t i = 0; i < 3; ++i) e.push_back({"weights/" + std::to_string(i), fixture_weight_bytes(i)});
  return e;
}

std::vector<RawEntry> fixture_entries_with_bool_weight(std::vector<uint8_t> bytes) {
  auto p = make_program();
  p->weights[2]->dtype = fbs::ScalarType::Bool;
  p->weights[2]->sizes = {2};
  p->weights[2]->strides = {1};
  p->weights[2]->byte_length = 2;
  std::vector<RawEntry> e = fixture_entries(*p);
  e[5].bytes = std::move(bytes);
  return e;
}

std::vector<uint8_t> build_aligned(const std::vector<RawEntry>& entries) {
  TempDir dir;
  std::vector<NewEntry> out;
  for (const RawEntry& e : entries) {
    if (e.deflate) throw std::logic_error("build_aligned writes STORED entries only");
    out.push_back({e.name, {e.bytes.data(), e.bytes.size()}});
  }
  write_archive(dir.file("a.pt2"), out);
  return read_file(dir.file("a.pt2"));
}

std::vector<uint8_t> build_raw_zip(const std::vector<RawEntry>& entries) {
  TempDir dir;
  const std::string path = dir.file("raw.zip");
  int err = 0;
  zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  if (za == nullptr) throw std::runtime_error("zip_open failed");
  for (const RawEntry& e : entries) {
    zip_source_t* s = zip_source_buffer(za, e.bytes.data(), e.bytes.size(), 0);
    const zip_int64_t idx = zip_file_add(za, e.name.c_str(), s, ZIP_FL_ENC_UTF_8);
    if (idx < 0) throw std::runtime_error("zip_file_add failed: " + std::string(zip_strerror(za)));
    zip_set_file_compression(za, static_cast<zip_uint64_t>(idx),
                             e.deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0);
  }
  if (zip_close(za) != 0) throw std::runtime_error("zip_close failed");
  return read_file(path);
}

std::vector<uint8_t> fixture_archive() { return build_aligned(fixture_entries(*make_program())); }

size_t patch_all(std::vector<uint8_t>& bytes, const std::string& from, const std::string& to) {
  if (from.size() != to.size()) throw std::logic_error("patch_all needs equal lengths");
  size_t count = 0;
  auto it = bytes.begin();
  while ((it = std::search(it, bytes.end(), from.begin(), from.end())) != bytes.end()) {
    std::copy(to.begin(), to.end(), it);
    it += static_cast<std::ptrdiff_t>(from.size());
    ++count;
  }
  return count;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/pt2rt-loader-test-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() { ::nftw(path_.c_str(), rm_entry, 16, FTW_DEPTH | FTW_PHYS); }

std::vector<std::string> TempDir::list() const {
  std::vector<std::string> names;
  DIR* d = ::opendir(path_.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!f) throw std::runtime_error("cannot write " + path);
}

void load_all(const std::vector<uint8_t>& archive_bytes) {
  Archive archive = Archive::from_bytes(archive_bytes.data(), archive_bytes.size());
  std::shared_ptr<const Program> program = read_program(archive);
  load_weights(archive, *program, c10::kCPU);
}

std::vector<LocalHeader> walk_local_headers(const std::vector<uint8_t>& zip) {
  auto u16 = [&](size_t p) { return static_cast<uint16_t>(zip.at(p) | (zip.at(p + 1) << 8)); };
  auto u32 = [&](size_t p) {
    return static_cast<uint32_t>(u16(p)) | (static_cast<uint32_t>(u16(p + 2)) << 16);
  };
  std::vector<LocalHeader> out;
  size_t pos = 0;
  while (pos + 30 <= zip.size() && u32(pos) == 0x04034b50) {
    LocalHeader h;
    h.method = u16(pos + 8);
    h.compressed_size = u32(pos + 18);
    const size_t n = u16(pos + 26), m = u16(pos + 28);
    h.name.assign(reinterpret_cast<const char*>(&zip.at(pos + 30)), n);
    h.data_offset = pos + 30 + n + m;
    if (u16(pos + 6) & 0x8) throw std::runtime_error("data descriptors are not expected");
    pos = h.data_offset + h.compressed_size;
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace pt2rt::test
