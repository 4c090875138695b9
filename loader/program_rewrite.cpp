// loader/program_rewrite.cpp — program.fb rewrites for Model::save (FlatBuffers object API).
#include <flatbuffers/flatbuffers.h>

#include <cstring>
#include <memory>

#include "pt2rt/archive_writer.h"
#include "pt2rt/constants.h"
#include "pt2rt/program.h"
#include "pt2rt_generated.h"

namespace pt2rt {

std::vector<uint8_t> drop_example_references(const uint8_t* data, size_t size,
                                             const ArchiveLimits& limits) {
  // Full verification, bounded decoding and validation first: UnPack must only see bytes
  // decode_program accepted (no absent union values, aligned vectors, and no sharing that
  // would make UnPack's copies exceed limits.decoded_bytes_for(size)).
  const std::shared_ptr<const Program> program = decode_program(data, size, limits);
  bool any = false;
  for (const Example& ex : program->examples) any = any || ex.references.has_value();
  if (!any) return std::vector<uint8_t>(data, data + size);

  std::unique_ptr<uint64_t[]> aligned;  // scalars are read in place (see decode.cpp)
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
    aligned.reset(new uint64_t[(size + 7) / 8 + 1]);
    std::memcpy(aligned.get(), data, size);
    data = reinterpret_cast<const uint8_t*>(aligned.get());
  }
  std::unique_ptr<fb::ProgramT> obj = fb::UnPackProgram(data);
  for (auto& ex : obj->examples) ex->references.reset();
  if (obj->schema_version->minor > kSchemaMinor) {
    // Fields of the newer minor did not survive UnPack/Pack: say what the bytes now are.
    obj->schema_version->major = kSchemaMajor;
    obj->schema_version->minor = kSchemaMinor;
  }
  flatbuffers::FlatBufferBuilder fbb(size);
  fb::FinishProgramBuffer(fbb, fb::Program::Pack(fbb, obj.get()));
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

}  // namespace pt2rt
