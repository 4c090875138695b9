// runtime/core/meta_memo.cpp — see meta_memo.h.
#include "core/meta_memo.h"

#include <ATen/ATen.h>

#include <cstring>
#include <optional>
#include <unordered_set>

namespace pt2rt {
namespace {

void append_int(std::string& key, int64_t v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

bool append_tensor(std::string& key, const at::Tensor& t) {
  if (!t.defined()) {
    key += 'u';
    return true;
  }
  if (t.layout() != c10::kStrided || !t.is_meta()) return false;
  key += 't';
  append_int(key, static_cast<int64_t>(t.scalar_type()));
  append_int(key, t.dim());
  for (int64_t s : t.sizes()) append_int(key, s);
  for (int64_t s : t.strides()) append_int(key, s);
  append_int(key, t.storage_offset());
  return true;
}

/// Appends `v`'s metadata (tensors) or value (everything else); false for kinds it does not
/// know (the call is then not remembered).
bool append(std::string& key, const c10::IValue& v) {
  if (v.isTensor()) return append_tensor(key, v.toTensor());
  if (v.isNone()) {
    key += 'n';
  } else if (v.isBool()) {
    key += v.toBool() ? 'T' : 'F';
  } else if (v.isInt()) {
    key += 'i';
    append_int(key, v.toInt());
  } else if (v.isDouble()) {
    key += 'd';
    const double d = v.toDouble();
    int64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    append_int(key, bits);
  } else if (v.isString()) {
    key += 's';
    append_int(key, static_cast<int64_t>(v.toStringRef().size()));
    key += v.toStringRef();
  } else if (v.isDevice()) {
    key += 'D';
    append_int(key, static_cast<int64_t>(v.toDevice().type()));
    append_int(key, v.toDevice().index());
  } else if (v.isList()) {
    key += '[';
    append_int(key, static_cast<int64_t>(v.toListRef().size()));
    for (const c10::IValue& e : v.toListRef()) {
      if (!append(key, e)) return false;
    }
    key += ']';
  } else {
    return false;  // complex numbers, tuples, objects...: not remembered
  }
  return true;
}

at::Tensor fresh(c10::ScalarType dtype, const std::vector<int64_t>& sizes,
                 const std::vector<int64_t>& strides) {
  return at::empty_strided(sizes, strides,
                           at::TensorOptions().dtype(dtype).device(c10::DeviceType::Meta));
}

}  // namespace

bool MetaMemo::pure(const c10::FunctionSchema& schema) {
  if (schema.is_mutable()) return false;
  for (const c10::Argument& r : schema.returns()) {
    if (r.alias_info() != nullptr) return false;
  }
  return true;
}

std::optional<std::string> MetaMemo::key(const c10::OperatorHandle& op, const torch::jit::Stack& args) {
  const c10::OperatorName& name = op.operator_name();
  std::string out = name.name + "." + name.overload_name + "(";
  for (const c10::IValue& a : args) {
    if (!append(out, a)) return std::nullopt;
  }
  return out;
}

bool MetaMemo::lookup(const std::string& key, torch::jit::Stack& results) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  results.clear();
  for (const Result& r : it->second) {
    if (!r.tensor) results.push_back(r.value);
    else if (!r.defined) results.emplace_back(at::Tensor());
    else results.emplace_back(fresh(r.dtype, r.sizes, r.strides));
  }
  return true;
}

void MetaMemo::remember(const std::string& key, const torch::jit::Stack& args,
                        const torch::jit::Stack& results) {
  if (entries_.count(key)) return;
  std::unordered_set<const void*> storages;
  for (const c10::IValue& a : args) {
    if (a.isTensor() && a.toTensor().defined() && a.toTensor().has_storage()) {
      storages.insert(a.toTensor().storage().unsafeGetStorageImpl());
    }
  }
  std::vector<Result> entry;
  for (const c10::IValue& v : results) {
    Result r;
    if (!v.isTensor()) {
      if (v.isList() || v.isTuple() || v.isObject() || v.isGenericDict()) return;
      r.value = v;
      entry.push_back(std::move(r));
      continue;
    }
    r.tensor = true;
    const at::Tensor& t = v.toTensor();
    r.defined = t.defined();
    if (r.defined) {
      if (!t.is_meta() || t.layout() != c10::kStrided || !t.has_storage() ||
          t.storage_offset() != 0 ||
          !storages.insert(t.storage().unsafeGetStorageImpl()).second) {
        return;  // an offset, or a storage shared with an argument or another result
      }
      r.dtype = t.scalar_type();
      r.sizes = t.sizes().vec();
      r.strides = t.strides().vec();
      if (fresh(r.dtype, r.sizes, r.strides).storage().nbytes() != t.storage().nbytes()) return;
    }
    entry.push_back(std::move(r));
  }
  entries_.emplace(key, std::move(entry));
}

}  // namespace pt2rt
