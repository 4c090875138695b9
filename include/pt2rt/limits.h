// pt2rt/limits.h — what reading and decoding an archive may cost (loader side).
//
// An archive is untrusted input: every size it declares is checked against these bounds
// before memory is allocated for it, so the memory a load takes is bounded by the file's size
// and these numbers, never by what the archive claims. The defaults suit any model pt2rt
// exports; raise them for unusually large programs. (Run-time bounds: pt2rt/load_options.h.)
#pragma once

#include <cstdint>

namespace pt2rt {

struct ArchiveLimits {
  /// program.fb: at most this many bytes (it must be STORED, so its size is also bounded by
  /// the file's). Default 1 GiB; FlatBuffers cannot address more than 2 GiB anyway.
  uint64_t max_program_bytes = uint64_t{1} << 30;
  /// Any other entry read into memory or copied by Model::save (archive_format,
  /// archive_version, extra/*; for a compressed extra/ entry its uncompressed size). Weights are
  /// bounded by the program's declared shapes and the file instead. Default 64 MiB.
  uint64_t max_entry_bytes = uint64_t{64} << 20;
  /// Bytes the decoded program (strings, vectors and objects of pt2rt::Program) may take.
  /// FlatBuffers lets many tables reference one string or vector, so K references to an
  /// L-byte string cost K·L bytes once decoded; this bounds that. 0 (default): 16 MiB plus 8
  /// times the size of program.fb (an exported program decodes to about 1–3 times its size).
  uint64_t max_decoded_bytes = 0;

  /// The decoded-bytes bound for a program of `program_bytes` bytes.
  uint64_t decoded_bytes_for(uint64_t program_bytes) const {
    if (max_decoded_bytes != 0) return max_decoded_bytes;
    constexpr uint64_t kFloor = uint64_t{16} << 20;
    return program_bytes > (UINT64_MAX - kFloor) / 8 ? UINT64_MAX : kFloor + 8 * program_bytes;
  }
};

}  // namespace pt2rt
