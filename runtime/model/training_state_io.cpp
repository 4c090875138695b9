// runtime/model/training_state_io.cpp — the training state inside the archive (schema 1.3):
// `optimizer/state.fb` (FlatBuffer TrainingState, identifier "PT2T") and `optimizer/<n>` (raw
// little-endian bytes of one state tensor). save_training_state writes them with the weights
// (Model::save's atomic copy); load_training_state reads them back as untrusted input: every
// check is listed in pt2rt/training_state.h and schema/README.md "Training state".
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <flatbuffers/flatbuffers.h>

#include <cmath>
#include <set>

#include "model/model_impl.h"
#include "pt2rt/archive.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"
#include "pt2rt/training_state.h"
#include "pt2rt_generated.h"

namespace pt2rt {
namespace {

namespace fbs = pt2rt::fb;

constexpr size_t kMaxSettings = 1024;
constexpr size_t kMaxGenerators = 64;
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxValueBytes = 4096;
constexpr size_t kMaxGeneratorBytes = 1 << 20;

/// The state names each optimizer keeps per parameter (torch/optim/sgd.h, adam.h).
std::vector<std::string> expected_hyper(const std::string& optimizer) {
  if (optimizer == "sgd") return {"lr", "momentum", "dampening", "weight_decay", "nesterov"};
  return {"lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad"};
}

std::vector<std::string> expected_tensors(const std::string& optimizer, bool amsgrad) {
  if (optimizer == "sgd") return {"momentum_buffer"};
  if (amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

std::string dims(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

/// The trainable parameter named `fqn`, or null.
const at::Tensor* find_param(const std::vector<std::pair<std::string, at::Tensor>>& params,
                             const std::string& fqn) {
  for (const auto& [name, p] : params) {
    if (name == fqn && p.requires_grad()) return &p;
  }
  return nullptr;
}

/// The trainable parameter (Program::weights) named `fqn`, or null.
const WeightInfo* find_weight(const Program& program, const std::string& fqn) {
  for (const WeightInfo& w : program.weights) {
    if (w.kind == WeightKind::Parameter && w.requires_grad && w.fqn == fqn) return &w;
  }
  return nullptr;
}

bool printable(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

/// "optimizer/<n>" with n decimal (no sign, no leading zero but "0").
bool is_tensor_entry(const std::string& name) {
  const std::string p = kOptimizerPrefix;
  if (name.size() <= p.size() || name.size() > p.size() + 18 || name.compare(0, p.size(), p)) {
    return false;
  }
  const std::string n = name.substr(p.size());
  if (n.size() > 1 && n[0] == '0') return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

class StateReader {
 public:
  StateReader(const Archive& archive, const Program& program)
      : archive_(archive), program_(program) {}

  TrainingState read() {
    const uint64_t max = ArchiveLimits{}.max_entry_bytes;
    std::vector<uint8_t> bytes;
    try {
      bytes = archive_.read(kTrainingStateEntry, max);
    } catch (const FormatError& e) {
      bad(e.what());
    }
    flatbuffers::Verifier::Options opts;
    opts.max_depth = 8;
    opts.max_tables = 1 << 20;
    flatbuffers::Verifier verifier(bytes.data(), bytes.size(), opts);
    if (bytes.size() < 8 || !verifier.VerifyBuffer<fbs::TrainingState>(kTrainingStateIdentifier)) {
      bad(std::string(kTrainingStateEntry) +
          " is not a valid TrainingState FlatBuffer "
          "(identifier " +
          kTrainingStateIdentifier + ")");
    }
    const auto* root = flatbuffers::GetRoot<fbs::TrainingState>(bytes.data());
    const fbs::SchemaVersion* v = root->schema_version();
    if (v == nullptr || v->major() != kSchemaMajor) {
      bad("schema major " + (v ? std::to_string(v->major()) : std::string("(absent)")) +
          ", this reader's is " + std::to_string(kSchemaMajor));
    }
    TrainingState s;
    s.optimizer = root->optimizer() ? root->optimizer()->str() : "";
    if (s.optimizer != "sgd" && s.optimizer != "adam") {
      bad("unknown optimizer '" + s.optimizer.substr(0, 64) + "' (sgd or adam)");
    }
    read_hyper(root, s);
    read_params(root, s);
    s.epochs = root->epochs();
    s.steps = root->steps();
    if (s.epochs < 0 || s.steps < 0) bad("negative epochs or steps");
    read_settings(root, s);
    read_generators(root, s);
    for (const EntryInfo& e : archive_.entries()) {
      if (e.name.compare(0, std::string(kOptimizerPrefix).size(), kOptimizerPrefix) == 0 &&
          e.name != kTrainingStateEntry && used_.count(e.name) == 0) {
        bad("entry '" + e.name + "' is not referenced by " + kTrainingStateEntry);
      }
    }
    return s;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    throw FormatError(archive_.source() + ": training state: " + what);
  }

  void read_hyper(const fbs::TrainingState* root, TrainingState& s) {
    const auto expected = expected_hyper(s.optimizer);
    const auto* hyper = root->hyper_parameters();
    if (hyper == nullptr || hyper->size() != expected.size()) {
      bad(s.optimizer + " needs exactly " + std::to_string(expected.size()) + " hyper-parameters");
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      const auto* h = hyper->Get(i);
      if (h->name() == nullptr || h->name()->str() != expected[i] || !std::isfinite(h->value())) {
        bad("hyper-parameter " + std::to_string(i) + " must be a finite '" + expected[i] + "'");
      }
      s.hyper_parameters.emplace_back(expected[i], h->value());
    }
  }

  void read_params(const fbs::TrainingState* root, TrainingState& s) {
    const bool amsgrad = s.optimizer == "adam" && s.hyper_parameter("amsgrad") != 0.0;
    const auto names = expected_tensors(s.optimizer, amsgrad);
    std::set<std::string> seen;
    if (root->params() == nullptr) return;
    for (const auto* ps : *root->params()) {
      const std::string fqn = ps->param() ? ps->param()->str() : "";
      const WeightInfo* param = find_weight(program_, fqn);
      if (param == nullptr)
        bad("'" + fqn.substr(0, kMaxNameBytes) + "' is not a trainable parameter");
      if (!seen.insert(fqn).second) bad("parameter '" + fqn + "' appears twice");
      if (ps->step() < 0) bad("parameter '" + fqn + "': negative step");
      OptimizerParamState out;
      out.param = fqn;
      out.step = ps->step();
      const size_t count = ps->tensors() ? ps->tensors()->size() : 0;
      if (count != names.size()) {
        bad("parameter '" + fqn + "' has " + std::to_string(count) + " state tensors, " +
            s.optimizer + (amsgrad ? " (amsgrad)" : "") + " keeps " + std::to_string(names.size()));
      }
      for (size_t i = 0; i < count; ++i) {
        out.tensors.emplace_back(names[i],
                                 read_tensor(fqn, names[i], *param, ps->tensors()->Get(i)));
      }
      s.params.push_back(std::move(out));
    }
  }

  at::Tensor read_tensor(const std::string& fqn, const std::string& name, const WeightInfo& param,
                         const fbs::OptimizerTensor* t) {
    const std::string what = "'" + fqn + "' " + name;
    if (t->name() == nullptr || t->name()->str() != name) bad(what + ": state tensor misnamed");
    if (static_cast<int>(t->dtype()) != static_cast<int>(param.dtype)) {
      bad(what + ": dtype " + std::to_string(static_cast<int>(t->dtype())) +
          " differs from the "
          "parameter's " +
          c10::toString(param.dtype));
    }
    std::vector<int64_t> sizes;
    if (t->sizes()) sizes.assign(t->sizes()->begin(), t->sizes()->end());
    if (sizes != param.sizes) {
      bad(what + ": sizes " + dims(sizes) + " differ from the parameter's " + dims(param.sizes));
    }
    const std::string entry = t->entry() ? t->entry()->str() : "";
    if (!is_tensor_entry(entry)) bad(what + ": entry name must be optimizer/<n>");
    if (!used_.insert(entry).second) bad(what + ": entry '" + entry + "' is used twice");
    if (!archive_.has_entry(entry)) bad(what + ": entry '" + entry + "' is missing");
    int64_t numel = 1;
    for (const int64_t d : param.sizes) numel *= d;  // the loader checked the weight's bytes
    const uint64_t nbytes = static_cast<uint64_t>(numel) * c10::elementSize(param.dtype);
    if (archive_.entry(entry).size != nbytes) {
      bad(what + ": entry '" + entry + "' holds " + std::to_string(archive_.entry(entry).size) +
          " bytes, " + std::to_string(nbytes) + " expected");
    }
    at::Tensor out = at::empty(param.sizes, at::TensorOptions().dtype(param.dtype));
    try {
      archive_.read_into(entry, out.data_ptr(), nbytes);
    } catch (const FormatError& e) {
      bad(e.what());
    }
    return out;
  }

  void read_settings(const fbs::TrainingState* root, TrainingState& s) {
    if (root->settings() == nullptr) return;
    if (root->settings()->size() > kMaxSettings) bad("more than 1024 settings");
    for (const auto* kv : *root->settings()) {
      const std::string key = kv->key() ? kv->key()->str() : "";
      const std::string value = kv->value() ? kv->value()->str() : "";
      if (!printable(key, kMaxNameBytes) || value.size() > kMaxValueBytes ||
          (!value.empty() && !printable(value, kMaxValueBytes))) {
        bad("a setting's key or value is empty, too long or not printable");
      }
      if (s.setting(key) != nullptr) bad("setting '" + key + "' appears twice");
      s.settings.emplace_back(key, value);
    }
  }

  void read_generators(const fbs::TrainingState* root, TrainingState& s) {
    if (root->generators() == nullptr) return;
    if (root->generators()->size() > kMaxGenerators) bad("more than 64 generator states");
    for (const auto* g : *root->generators()) {
      const std::string name = g->name() ? g->name()->str() : "";
      if (!printable(name, kMaxNameBytes) || s.generator(name).defined()) {
        bad("a generator name is empty, too long, not printable or repeated");
      }
      if (name.rfind("cuda:", 0) == 0) {
        const std::string idx = name.substr(5);
        if (idx.empty() || idx.size() > 3 ||
            !std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          bad("generator '" + name + "': expected cuda:<index>");
        }
      }
      const size_t n = g->state() ? g->state()->size() : 0;
      if (n == 0 || n > kMaxGeneratorBytes)
        bad("generator '" + name + "': state of " + std::to_string(n) + " bytes (1 B to 1 MiB)");
      at::Tensor t = at::empty({static_cast<int64_t>(n)}, at::kByte);
      std::memcpy(t.data_ptr(), g->state()->data(), n);
      s.generators.emplace_back(name, t);
    }
  }

  const Archive& archive_;
  const Program& program_;
  std::set<std::string> used_;
};

}  // namespace

void save_training_state(const Model& model, const TrainingState& state, const std::string& path) {
  c10::AutoGradMode no_grad(false);
  const auto params = model.named_parameters();
  fbs::TrainingStateT t;
  t.schema_version = std::make_unique<fbs::SchemaVersionT>();
  t.schema_version->major = kSchemaMajor;
  t.schema_version->minor = kSchemaMinor;
  t.optimizer = state.optimizer;
  for (const auto& [name, value] : state.hyper_parameters) {
    auto h = std::make_unique<fbs::NamedDoubleT>();
    h->name = name;
    h->value = value;
    t.hyper_parameters.push_back(std::move(h));
  }
  std::vector<at::Tensor> bytes;   // contiguous CPU copies, alive until the write returns
  std::vector<std::string> names;  // entry names
  for (const OptimizerParamState& ps : state.params) {
    const at::Tensor* param = find_param(params, ps.param);
    if (param == nullptr) {
      throw InputError("save_training_state: '" + ps.param + "' is not a trainable parameter");
    }
    auto out = std::make_unique<fbs::OptimizerParamStateT>();
    out->param = ps.param;
    out->step = ps.step;
    for (const auto& [name, tensor] : ps.tensors) {
      if (tensor.scalar_type() != param->scalar_type() || tensor.sizes() != param->sizes()) {
        throw InputError("save_training_state: '" + ps.param + "' " + name + " is " +
                         c10::toString(tensor.scalar_type()) + dims(tensor.sizes()) +
                         ", the parameter " + c10::toString(param->scalar_type()) +
                         dims(param->sizes()));
      }
      auto rec = std::make_unique<fbs::OptimizerTensorT>();
      rec->name = name;
      rec->entry = kOptimizerPrefix + std::to_string(bytes.size());
      rec->dtype = static_cast<fbs::ScalarType>(static_cast<int8_t>(tensor.scalar_type()));
      rec->sizes = tensor.sizes().vec();
      names.push_back(rec->entry);
      bytes.push_back(tensor.detach().to(at::kCPU).contiguous());
      out->tensors.push_back(std::move(rec));
    }
    t.params.push_back(std::move(out));
  }
  t.epochs = state.epochs;
  t.steps = state.steps;
  for (const auto& [key, value] : state.settings) {
    auto kv = std::make_unique<fbs::KeyValueT>();
    kv->key = key;
    kv->value = value;
    t.settings.push_back(std::move(kv));
  }
  for (const auto& [name, gen] : state.generators) {
    auto g = std::make_unique<fbs::GeneratorStateT>();
    g->name = name;
    const at::Tensor b = gen.to(at::kCPU).contiguous();
    const auto* p = static_cast<const uint8_t*>(b.data_ptr());
    g->state.assign(p, p + b.numel() * b.element_size());
    t.generators.push_back(std::move(g));
  }
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::TrainingState::Pack(fbb, &t), kTrainingStateIdentifier);
  std::vector<NewEntry> entries;
  entries.push_back(
      NewEntry{kTrainingStateEntry, EntryBytes{fbb.GetBufferPointer(), fbb.GetSize()}});
  for (size_t i = 0; i < bytes.size(); ++i) {
    entries.push_back(NewEntry{
        names[i], EntryBytes{bytes[i].data_ptr(), static_cast<uint64_t>(bytes[i].nbytes())}});
  }
  const ModelState& s = model_state(model);
  WriteOptions options;
  options.limits = s.archive_limits;
  save_model(s, path, options, entries);
}

std::optional<TrainingState> load_training_state(const Archive& archive, const Program& program) {
  if (!archive.has_entry(kTrainingStateEntry)) {
    for (const EntryInfo& e : archive.entries()) {
      if (e.name.rfind(kOptimizerPrefix, 0) == 0) {
        throw FormatError(archive.source() + ": training state: entry '" + e.name + "' without " +
                          kTrainingStateEntry);
      }
    }
    return std::nullopt;
  }
  return StateReader(archive, program).read();
}

std::optional<TrainingState> load_training_state(const Model& model) {
  const ModelState& s = model_state(model);
  if (!s.archive) return std::nullopt;
  return load_training_state(*s.archive, *s.program);
}

}  // namespace pt2rt
