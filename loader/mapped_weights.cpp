// loader/mapped_weights.cpp — see pt2rt/mapped_weights.h.
#include "pt2rt/mapped_weights.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/Storage.h>

#include <string>

#include "pt2rt/errors.h"
#include "weight_entry.h"

namespace pt2rt {
namespace {

/// DataPtr context: keeps the mapping alive while a storage views it.
struct MappingRef {
  std::shared_ptr<const MappedFile> file;
};

void release_mapping(void* ctx) { delete static_cast<MappingRef*>(ctx); }

}  // namespace

std::vector<at::Tensor> map_weights(const std::shared_ptr<const MappedFile>& file,
                                    const Archive& archive, const Program& program) {
  require_little_endian(file->path());
  std::vector<at::Tensor> out;
  out.reserve(program.weights.size());
  for (const WeightInfo& w : program.weights) {
    const std::string what = file->path() + ": weight '" + w.fqn + "' (entry '" + w.entry + "')";
    const CheckedEntry c = check_weight_entry(archive, w, what);
    const EntryInfo& e = *c.entry;
    const uint64_t nbytes = c.nbytes;
    if (e.data_offset > file->size() || nbytes > file->size() - e.data_offset) {
      throw FormatError(what + ": data [" + std::to_string(e.data_offset) + ", +" +
                        std::to_string(nbytes) + ") lies outside the mapped file of " +
                        std::to_string(file->size()) + " bytes");
    }
    uint8_t* data = file->mutable_data() + e.data_offset;
    if (w.dtype == at::kBool) check_bool_bytes(data, nbytes, what);
    c10::AutoGradMode no_grad(false);
    c10::DataPtr ptr(data, new MappingRef{file}, &release_mapping, c10::Device(c10::kCPU));
    c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(ptr),
                         /*allocator=*/nullptr, /*resizable=*/false);
    at::Tensor t = at::empty({0}, at::TensorOptions().dtype(w.dtype));
    t.set_(storage, w.storage_offset, w.sizes, w.strides);
    if (w.requires_grad) t.set_requires_grad(true);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace pt2rt
