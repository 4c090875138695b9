// cli/tensor_io.cpp — torch.save-compatible tensor files (pickle_load / pickle_save).
#include "tensor_io.h"

#include <ATen/ops/empty.h>
#include <c10/util/irange.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "cli.h"
#include "pickle_compat.h"
#include "pt2rt/errors.h"
#include "pt2rt/input_tree.h"

namespace pt2rt::cli {
namespace {

/// torch.load for LibTorch: the zip written by torch.save (default, new serialization),
/// its data.pkl made readable by normalize_pickle, tensors read from data/<key> records.
/// The same steps as torch::jit::pickle_load (readArchiveAndTensors), which cannot be given
/// rewritten pickle bytes.
c10::IValue read_pickle(const std::string& path, const std::string& what) {
  require_file(path, what + " file");
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    auto [pickle_ptr, pickle_size] = zip.getRecord("data.pkl");
    const std::string pickle =
        normalize_pickle(std::string(static_cast<const char*>(pickle_ptr.get()), pickle_size));
    size_t offset = 0;
    auto reader = [&](char* buffer, size_t n) -> size_t {
      n = std::min(n, pickle.size() - offset);
      std::memcpy(buffer, pickle.data() + offset, n);
      offset += n;
      return n;
    };
    auto read_record = [&](const std::string& name) {
      return std::get<0>(zip.getRecord("data/" + name));
    };
    torch::jit::Unpickler unpickler(reader, nullptr, nullptr, read_record, c10::Device(c10::kCPU));
    unpickler.set_version(zip.version());
    return unpickler.parse_ivalue();
  } catch (const c10::Error& e) {
    std::string msg = e.what_without_backtrace();
    msg = msg.substr(0, msg.find('\n'));
    throw UsageError(what + ": " + path + " is not a file written by torch.save (" + msg + ")");
  }
}

/// Python's name for what `value` holds: "dict", "list", "int", ...
std::string kind_of(const c10::IValue& value) {
  if (value.isGenericDict()) return "dict";
  if (value.isList()) return "list";
  if (value.isTuple()) return "tuple";
  if (value.isInt()) return "int";
  if (value.isDouble()) return "float";
  if (value.isBool()) return "bool";
  if (value.isString()) return "str";
  if (value.isNone()) return "None";
  return value.tagKind();
}

void write_bytes(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) throw UsageError("cannot write " + path);
}

/// torch::jit::pickle_save without type tags: the same zip (data.pkl + data/<key> storages),
/// but lists and dicts pickled as plain Python containers. pickle_save tags them with
/// torch.jit._pickle.restore_type_tag / build_tensorlist, which torch.load refuses by default
/// since torch 2.6 (weights_only=True allows no such globals).
std::vector<char> pickle_save_plain(const c10::IValue& value) {
  std::vector<char> pickle;
  torch::jit::Pickler pickler(
      [&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
      /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(value);
  pickler.stop();
  std::vector<char> file;
  {
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
      const char* bytes = static_cast<const char*>(data);
      file.insert(file.end(), bytes, bytes + n);
      return n;
    });
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                       writer);
  }  // the writer's destructor writes the zip's central directory
  return file;
}

at::Tensor for_saving(const at::Tensor& t) {
  // pickle_save writes the whole storage of a view; a contiguous CPU copy keeps files small.
  return t.defined() ? t.detach().to(at::kCPU).contiguous() : t;
}

}  // namespace

std::vector<at::Tensor> load_tensor_list(const std::string& path, const std::string& what) {
  c10::IValue value = read_pickle(path, what);
  std::vector<c10::IValue> items;
  if (value.isTensor()) {
    items.push_back(value);
  } else if (value.isTuple()) {
    items = value.toTupleRef().elements().vec();
  } else if (value.isList()) {
    items = value.toListRef().vec();
  } else {
    throw UsageError(what + ": " + path + " holds a " + kind_of(value) +
                     ", expected a tuple or list of tensors");
  }
  std::vector<at::Tensor> tensors;
  for (const auto i : c10::irange(items.size())) {
    if (!items[i].isTensor()) {
      throw UsageError(what + ": element " + std::to_string(i) + " of " + path + " is a " +
                       kind_of(items[i]) + ", expected a tensor");
    }
    tensors.push_back(items[i].toTensor());
  }
  return tensors;
}

namespace {

/// A model whose forward() took tuples, lists or dicts (pt2rt/input_tree.h): the file holds
/// the arguments as a tuple or list (positional), a dict by parameter name, or one tensor.
std::vector<at::Tensor> load_structured_inputs(const c10::IValue& value, const std::string& path,
                                               const std::string& what,
                                               const Signature& signature) {
  std::vector<c10::IValue> args;
  NamedValues kwargs;
  if (value.isGenericDict()) {
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString()) {
        throw UsageError(what + ": " + path + " is a dict with a " + kind_of(entry.key()) +
                         " key; expected {parameter name: value}");
      }
      kwargs.emplace_back(entry.key().toStringRef(), entry.value());
    }
  } else if (value.isTuple()) {
    args = value.toTupleRef().elements().vec();
  } else if (value.isList()) {
    args = value.toListRef().vec();
  } else if (value.isTensor()) {
    args = {value};
  } else {
    throw UsageError(what + ": " + path + " holds a " + kind_of(value) +
                     "; expected the arguments as a tuple or list, or a dict by parameter name");
  }
  try {
    return flatten_inputs(signature, args, kwargs);
  } catch (const InputError& e) {
    throw UsageError(what + ": " + path + ": " + e.what());
  }
}

}  // namespace

std::vector<at::Tensor> load_inputs(const std::string& path, const std::string& what,
                                    const Signature& signature) {
  c10::IValue value = read_pickle(path, what);
  if (has_structured_inputs(signature.params)) {
    return load_structured_inputs(value, path, what, signature);
  }
  if (!value.isGenericDict()) return load_tensor_list(path, what);
  std::vector<at::Tensor> tensors(signature.inputs.size());
  std::vector<bool> given(signature.inputs.size(), false);
  for (const auto& entry : value.toGenericDict()) {
    if (!entry.key().isString()) {
      throw UsageError(what + ": " + path + " is a dict with a " + kind_of(entry.key()) +
                       " key; expected {input name: tensor}");
    }
    const std::string name = entry.key().toStringRef();
    const int64_t i = signature.input_index(name);
    if (i < 0) {
      std::string names;
      for (const TensorSpec& in : signature.inputs) names += (names.empty() ? "" : ", ") + in.name;
      throw UsageError(what + ": " + path + " names input '" + name +
                       "', which the model does not take (its inputs: " + names + ")");
    }
    if (!entry.value().isTensor()) {
      throw UsageError(what + ": input '" + name + "' of " + path + " is a " +
                       kind_of(entry.value()) + ", expected a tensor");
    }
    tensors[static_cast<size_t>(i)] = entry.value().toTensor();
    given[static_cast<size_t>(i)] = true;
  }
  for (size_t i = 0; i < given.size(); ++i) {
    if (!given[i]) {
      throw UsageError(what + ": " + path + " has no input '" + signature.inputs[i].name +
                       "' (a dict must name every input)");
    }
  }
  return tensors;
}

Dataset load_dataset(const std::string& path, const std::string& what) {
  c10::IValue value = read_pickle(path, what);
  std::vector<c10::IValue> items;
  if (value.isTuple()) items = value.toTupleRef().elements().vec();
  if (value.isList()) items = value.toListRef().vec();
  if (items.size() != 2) {
    throw UsageError(what + ": " + path + " holds " +
                     (items.empty() && !value.isTuple() && !value.isList()
                          ? "a " + kind_of(value)
                          : std::to_string(items.size()) + " tensors") +
                     ", expected (inputs, targets) or ((input_0, input_1, ...), targets)");
  }
  auto tensor_at = [&](const c10::IValue& item, const std::string& where) {
    if (!item.isTensor()) {
      throw UsageError(what + ": " + where + " of " + path + " is a " + kind_of(item) +
                       ", expected a tensor");
    }
    return item.toTensor();
  };
  Dataset data;
  if (items[0].isTuple() || items[0].isList()) {
    const auto inner = items[0].isTuple() ? items[0].toTupleRef().elements().vec()
                                          : items[0].toListRef().vec();
    if (inner.empty()) throw UsageError(what + ": " + path + " holds an empty inputs tuple");
    for (const auto i : c10::irange(inner.size())) {
      data.inputs.push_back(tensor_at(inner[i], "input " + std::to_string(i)));
    }
  } else {
    data.inputs.push_back(tensor_at(items[0], "element 0"));
  }
  data.targets = tensor_at(items[1], "element 1 (targets)");
  const at::Tensor& targets = data.targets;
  for (const auto i : c10::irange(data.inputs.size())) {
    const at::Tensor& inputs = data.inputs[i];
    if (inputs.dim() == 0 || targets.dim() == 0 || inputs.size(0) != targets.size(0)) {
      throw UsageError(what + ": " + path + ": " +
                       (data.inputs.size() > 1 ? "input " + std::to_string(i) : "inputs") + " " +
                       describe(inputs) + " and targets " + describe(targets) +
                       " must have the same first (sample) dimension");
    }
  }
  return data;
}

void save_tensor_list(const std::string& path, const std::vector<at::Tensor>& tensors) {
  c10::impl::GenericList list(c10::AnyType::get());  // a typed Tensor[] pickles as build_tensorlist
  for (const auto& t : tensors) list.push_back(for_saving(t));
  write_bytes(path, pickle_save_plain(list));
}

void save_tensor_dict(const std::string& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto& [name, t] : tensors) dict.insert(name, for_saving(t));
  write_bytes(path, pickle_save_plain(dict));
}

std::string describe(const at::Tensor& tensor, bool with_device) {
  if (!tensor.defined()) return "None";
  std::ostringstream out;
  out << dtype_name(tensor.scalar_type()) << tensor.sizes();
  if (with_device && !tensor.device().is_cpu()) out << " on " << tensor.device();
  return out.str();
}

}  // namespace pt2rt::cli
