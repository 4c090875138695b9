// loader/weights.cpp — weights: archive entries <-> tensors (see pt2rt/weights.h).
#include "pt2rt/weights.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstring>
#include <string>

#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "validate.h"
#include "weight_entry.h"

namespace pt2rt {
namespace {

std::string describe(const Archive& archive, const WeightInfo& w) {
  return archive.source() + ": weight '" + w.fqn + "' (entry '" + w.entry + "')";
}

std::string shape_string(c10::ScalarType dtype, at::IntArrayRef sizes) {
  std::string s = std::string(c10::toString(dtype)) + "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

}  // namespace

std::vector<at::Tensor> load_weights(const Archive& archive, const Program& program,
                                     c10::Device device) {
  require_little_endian(archive.source());
  if (device.is_cuda() && !at::hasCUDA()) {
    throw InputError("device " + device.str() + " requested, but this LibTorch has no CUDA");
  }
  std::vector<at::Tensor> out;
  out.reserve(program.weights.size());
  for (const WeightInfo& w : program.weights) {
    const std::string what = describe(archive, w);
    const CheckedEntry c = check_weight_entry(archive, w, what);
    const int64_t numel = c.numel;
    const uint64_t nbytes = c.nbytes;

    c10::AutoGradMode no_grad(false);
    const auto options = at::TensorOptions().dtype(w.dtype);
    // The final tensor's storage on CPU, or a pinned staging buffer for CUDA.
    at::Tensor host = at::empty({numel}, options.pinned_memory(device.is_cuda()));
    archive.read_into(w.entry, host.data_ptr(), nbytes);
    if (w.dtype == at::kBool) {
      check_bool_bytes(static_cast<const uint8_t*>(host.data_ptr()), nbytes, what);
    }
    at::Tensor storage = device.is_cpu() ? host : host.to(device, /*non_blocking=*/device.is_cuda());
    at::Tensor t = at::empty({0}, storage.options());
    t.set_(storage.storage(), w.storage_offset, w.sizes, w.strides);
    if (w.requires_grad) t.set_requires_grad(true);
    out.push_back(std::move(t));
  }
  return out;
}

at::Tensor weight_entry_bytes(const WeightInfo& info, const at::Tensor& value) {
  const std::string what = "weight '" + info.fqn + "'";
  if (!value.defined()) throw InputError(what + ": undefined tensor");
  if (value.scalar_type() != info.dtype || value.sizes() != at::IntArrayRef(info.sizes)) {
    throw InputError(what + ": tensor is " + shape_string(value.scalar_type(), value.sizes()) +
                     ", the archive records " + shape_string(info.dtype, info.sizes));
  }
  int64_t numel = 0;
  uint64_t nbytes = 0;
  if (!checked_storage_numel(info.sizes, info.strides, info.storage_offset, &numel) ||
      !checked_nbytes(numel, info.dtype, &nbytes) || nbytes != info.byte_length) {
    throw InputError(what + ": recorded layout does not match byte_length " +
                     std::to_string(info.byte_length));
  }
  c10::AutoGradMode no_grad(false);
  at::Tensor storage = at::zeros({numel}, at::TensorOptions().dtype(info.dtype));
  if (numel > 0) {
    storage.as_strided(info.sizes, info.strides, info.storage_offset).copy_(value.detach());
  }
  return storage;
}

void save_weights(const std::string& path, const Archive& source, const Program& program,
                  const std::vector<at::Tensor>& weights, const WriteOptions& options) {
  if (weights.size() != program.weights.size()) {
    throw InputError("save: " + std::to_string(weights.size()) + " tensors given, the program has " +
                     std::to_string(program.weights.size()) + " weights");
  }
  const std::vector<uint8_t> old_program = read_program_bytes(source, options.limits);
  const std::vector<uint8_t> new_program =
      drop_example_references(old_program.data(), old_program.size(), options.limits);
  std::vector<at::Tensor> bytes;
  bytes.reserve(weights.size());
  std::vector<NewEntry> replacements;
  replacements.reserve(weights.size() + 1);
  replacements.push_back({kProgramEntry, {new_program.data(), new_program.size()}});
  for (size_t i = 0; i < weights.size(); ++i) {
    bytes.push_back(weight_entry_bytes(program.weights[i], weights[i]));
    replacements.push_back({program.weights[i].entry,
                            {bytes.back().data_ptr(), program.weights[i].byte_length}});
  }
  write_archive_copy(path, source, replacements, options);
}

at::Tensor to_tensor(const TensorData& data) {
  int64_t numel = 0;
  uint64_t expected = 0;
  if (!checked_numel(data.sizes, &numel) || !checked_nbytes(numel, data.dtype, &expected) ||
      expected != data.data.size()) {
    throw FormatError("bundled tensor of dtype " + std::string(c10::toString(data.dtype)) +
                      " and " + std::to_string(data.sizes.size()) + " dims holds " +
                      std::to_string(data.data.size()) + " bytes, not dtype size x numel");
  }
  at::Tensor t = at::empty(data.sizes, at::TensorOptions().dtype(data.dtype));
  if (expected > 0) std::memcpy(t.data_ptr(), data.data.data(), expected);
  return t;
}

}  // namespace pt2rt
