// loader/program_rewrite.cpp — program.fb rewrites for Model::save (FlatBuffers object API).
#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "pt2rt/archive_writer.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/program.h"
#include "pt2rt_generated.h"

namespace pt2rt {

namespace {

/// decode_program's checks (full verification, bounded decoding, validation) and then the
/// object API's copy: UnPack must only see bytes decode_program accepted (no absent union
/// values, aligned vectors, no sharing that would make UnPack's copies exceed
/// limits.decoded_bytes_for(size)).
std::unique_ptr<fb::ProgramT> unpack_checked(const uint8_t* data, size_t size) {
  std::unique_ptr<uint64_t[]> aligned;  // scalars are read in place (see decode.cpp)
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
    aligned.reset(new uint64_t[(size + 7) / 8 + 1]);
    std::memcpy(aligned.get(), data, size);
    data = reinterpret_cast<const uint8_t*>(aligned.get());
  }
  return fb::UnPackProgram(data);
}

std::vector<uint8_t> pack(fb::ProgramT& obj, size_t size_hint) {
  if (obj.schema_version->minor > kSchemaMinor) {
    // Fields of the newer minor did not survive UnPack/Pack: say what the bytes now are.
    obj.schema_version->major = kSchemaMajor;
    obj.schema_version->minor = kSchemaMinor;
  }
  flatbuffers::FlatBufferBuilder fbb(size_hint);
  fb::FinishProgramBuffer(fbb, fb::Program::Pack(fbb, &obj));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace

std::vector<uint8_t> drop_example_references(const uint8_t* data, size_t size,
                                             const ArchiveLimits& limits) {
  const std::shared_ptr<const Program> program = decode_program(data, size, limits);
  bool any = false;
  for (const Example& ex : program->examples) any = any || ex.references.has_value();
  if (!any) return std::vector<uint8_t>(data, data + size);
  std::unique_ptr<fb::ProgramT> obj = unpack_checked(data, size);
  for (auto& ex : obj->examples) ex->references.reset();
  return pack(*obj, size);
}

std::vector<uint8_t> strip_training(const uint8_t* data, size_t size,
                                    const ArchiveLimits& limits) {
  const std::shared_ptr<const Program> program = decode_program(data, size, limits);
  if (program->graph(GraphRole::Inference) == nullptr) {
    throw InputError(
        "the archive has no inference graph (exported with inference=False): stripping its "
        "training graphs would leave nothing to run");
  }
  std::unique_ptr<fb::ProgramT> obj = unpack_checked(data, size);
  auto& graphs = obj->graphs;
  graphs.erase(std::remove_if(graphs.begin(), graphs.end(),
                              [](const std::unique_ptr<fb::GraphT>& g) {
                                return g->role != fb::GraphRole::Inference;
                              }),
               graphs.end());
  // The operators only the removed graphs called go too (the table keeps its order; node op
  // indices are renumbered): loading resolves every operator of the table, so a deployment
  // copy would otherwise still need a backward kernel the running LibTorch may lack (a custom
  // op's backward).
  std::vector<bool> used(obj->operators.size(), false);
  for (const auto& g : graphs) {
    for (const auto& n : g->nodes) used[n->op] = true;  // decode_program checked the range
  }
  std::vector<uint32_t> renumbered(obj->operators.size(), 0);
  std::vector<std::unique_ptr<fb::OperatorT>> kept;
  for (size_t i = 0; i < obj->operators.size(); ++i) {
    if (!used[i]) continue;
    renumbered[i] = static_cast<uint32_t>(kept.size());
    kept.push_back(std::move(obj->operators[i]));
  }
  obj->operators = std::move(kept);
  for (auto& g : graphs) {
    for (auto& n : g->nodes) n->op = renumbered[n->op];
  }
  for (auto& ex : obj->examples) {
    if (!ex->references) continue;  // the eval-mode outputs stay: the weights are the same
    ex->references->train_outputs.clear();
    ex->references->grad_outputs.clear();
    ex->references->grads.clear();
    ex->references->buffers.clear();
  }
  return pack(*obj, size);
}

}  // namespace pt2rt
