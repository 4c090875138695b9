// loader/mapped_weights.cpp — see pt2rt/mapped_weights.h.
#include "pt2rt/mapped_weights.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/Storage.h>

#include <string>

#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "validate.h"

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
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  throw FormatError(file->path() +
                    ": weights are stored little-endian and this host is big-endian; "
                    "pt2rt does not byte-swap weights");
#endif
  std::vector<at::Tensor> out;
  out.reserve(program.weights.size());
  for (const WeightInfo& w : program.weights) {
    const std::string what = file->path() + ": weight '" + w.fqn + "' (entry '" + w.entry + "')";
    if (!archive.has_entry(w.entry)) throw FormatError(what + ": the entry is missing");
    const EntryInfo& e = archive.entry(w.entry);
    if (!e.stored) {
      throw FormatError(what + ": the entry is compressed (zip method " + std::to_string(e.method) +
                        "); weights must be STORED");
    }
    if (e.data_offset % kDataAlignment != 0) {
      throw FormatError(what + ": data at offset " + std::to_string(e.data_offset) + " is not " +
                        std::to_string(kDataAlignment) + "-byte aligned");
    }
    int64_t numel = 0;
    uint64_t nbytes = 0;
    if (!checked_storage_numel(w.sizes, w.strides, w.storage_offset, &numel) ||
        !checked_nbytes(numel, w.dtype, &nbytes)) {
      throw FormatError(what + ": sizes/strides/storage_offset are negative or overflow");
    }
    if (e.size != nbytes) {
      throw FormatError(what + ": the entry has " + std::to_string(e.size) + " bytes, expected " +
                        std::to_string(nbytes) + " (" + c10::toString(w.dtype) + " x " +
                        std::to_string(numel) + " storage elements)");
    }
    if (e.data_offset > file->size() || nbytes > file->size() - e.data_offset) {
      throw FormatError(what + ": data [" + std::to_string(e.data_offset) + ", +" +
                        std::to_string(nbytes) + ") lies outside the mapped file of " +
                        std::to_string(file->size()) + " bytes");
    }
    uint8_t* data = file->mutable_data() + e.data_offset;
    if (w.dtype == at::kBool) {
      for (uint64_t i = 0; i < nbytes; ++i) {
        if (data[i] > 1) {
          throw FormatError(what + ": bool element " + std::to_string(i) + " has byte value " +
                            std::to_string(data[i]) + " (only 0 and 1 are valid)");
        }
      }
    }
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
