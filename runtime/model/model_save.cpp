// runtime/model/model_save.cpp — Model::save: the current weights written into a copy of the
// archive.
//
// Every weight entry "weights/<n>" is replaced by the tensor's current values laid out as
// Program::weights records them (storage of byte_length bytes; the tensor at sizes/strides/
// storage_offset inside it; little-endian host bytes), and program.fb by a copy whose
// bundled example references are dropped (they belong to the old weights; the example
// inputs stay). A training state (optimizer/*) is dropped: it belongs to the old weights
// (save_training_state, training_state_io.cpp, writes a new one through `extra`). Everything
// else (archive_format, archive_version, extra/*) is copied as is.
// The write is atomic (pt2rt::write_archive_copy: temp file, fsync, rename).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "model/model_impl.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"

namespace pt2rt {
namespace {

/// The bytes of weight `w` as the archive stores them: a CPU tensor of the whole storage.
at::Tensor storage_bytes(const WeightInfo& w, const at::Tensor& value) {
  const int64_t element_size = static_cast<int64_t>(c10::elementSize(w.dtype));
  const int64_t numel = static_cast<int64_t>(w.byte_length) / element_size;
  at::Tensor storage = at::zeros({numel}, at::TensorOptions().dtype(w.dtype));
  at::Tensor view = storage.as_strided(w.sizes, w.strides, w.storage_offset);
  view.copy_(value.detach());
  return storage;
}

}  // namespace

void save_model(const ModelState& s, const std::string& path, const WriteOptions& options,
                const std::vector<NewEntry>& extra) {
  if (!s.archive) {
    throw Error("pt2rt::Model::save(" + path +
                "): this model was built with from_program and has no source archive");
  }
  c10::AutoGradMode no_grad(false);
  std::vector<at::Tensor> bytes;
  bytes.reserve(s.weights.size());
  std::vector<NewEntry> replacements;
  replacements.reserve(s.weights.size() + 1);
  for (size_t i = 0; i < s.weights.size(); ++i) {
    const WeightInfo& w = s.program->weights[i];
    bytes.push_back(storage_bytes(w, s.weights[i]));
    replacements.push_back(NewEntry{w.entry, EntryBytes{bytes.back().data_ptr(), w.byte_length}});
  }
  std::vector<uint8_t> program = read_program_bytes(*s.archive, options.limits);
  std::vector<uint8_t> rewritten =
      drop_example_references(program.data(), program.size(), options.limits);
  replacements.push_back(NewEntry{kProgramEntry, EntryBytes{rewritten.data(), rewritten.size()}});
  replacements.insert(replacements.end(), extra.begin(), extra.end());
  WriteOptions copy_options = options;
  copy_options.omit_prefixes.push_back(kOptimizerPrefix);  // belongs to the old weights
  write_archive_copy(path, *s.archive, replacements, copy_options);
}

void Model::save(const std::string& path) const {
  WriteOptions options;
  options.limits = impl_->state->archive_limits;
  save_model(*impl_->state, path, options);
}

}  // namespace pt2rt
