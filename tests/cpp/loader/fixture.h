// tests/cpp/loader/fixture.h — small archives built from scratch for the loader tests.
//
// The valid fixture is a tiny trainable program over `y = relu(x * w)`:
//   weights   w       parameter float32[2, 3], requires_grad, values -2.5 .. 2.5 (step 1)
//             frozen  parameter float32[3], requires_grad=False (no gradient, no backward)
//             count   buffer int64[] (0-dim), value 7
//   inference inputs Param(w), Param(frozen), Buffer(count), Plain(0) = x float32[2, 3]
//             mul.Tensor(x, w) -> relu -> output Plain(0)
//   forward   as inference, plus outputs Saved(0) = relu result, Saved(1) = x
//   backward  inputs Saved(0), Saved(1), Tangent(Plain(0));
//             threshold_backward(tangent, relu, 0) -> mul.Tensor(_, x) -> Grad(Param(w))
//   examples  one example: input x, with references (outputs, grads)
// Every bad-input test mutates one thing of this (program table, entry bytes or zip bytes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "pt2rt_generated.h"

namespace pt2rt::test {

namespace fbs = pt2rt::fb;

/// Pieces of programs (object API), for fixtures and reproducers.
std::unique_ptr<fbs::DimT> dim(int64_t v);
/// A Tensor value with contiguous strides, storage offset 0, on cpu.
std::unique_ptr<fbs::ValueT> tensor_value(const std::string& name, fbs::ScalarType dtype,
                                          std::vector<int64_t> sizes);
std::unique_ptr<fbs::InputDescriptorT> in_desc(fbs::InputKind kind, const std::string& fqn = "",
                                               int64_t idx = 0);
std::unique_ptr<fbs::OutputDescriptorT> out_desc(fbs::OutputKind kind, int64_t idx = 0);
std::unique_ptr<fbs::GraphInputT> input(uint32_t value, std::unique_ptr<fbs::InputDescriptorT> d);
std::unique_ptr<fbs::GraphOutputT> output(int32_t value,
                                          std::unique_ptr<fbs::OutputDescriptorT> d);
std::unique_ptr<fbs::ArgumentT> tensor_arg(const std::string& name, uint32_t value);
std::unique_ptr<fbs::NodeT> node(uint32_t op, const std::string& fx_name,
                                 std::vector<std::unique_ptr<fbs::ArgumentT>> args,
                                 std::vector<uint32_t> outputs);

/// The valid fixture program (object API), freshly built.
std::unique_ptr<fbs::ProgramT> make_program();
/// Serializes with the "PT2R" identifier.
std::vector<uint8_t> pack(const fbs::ProgramT& program);

/// Bytes of weight `i` of the fixture (w, frozen, count).
std::vector<uint8_t> fixture_weight_bytes(size_t i);
/// Values of w as floats, row-major.
std::vector<float> fixture_w_values();

/// One zip entry for the raw builders below.
struct RawEntry {
  std::string name;
  std::vector<uint8_t> bytes;
  bool deflate = false;  ///< compress with DEFLATE (libzip) instead of STORED
};

/// The entries of the valid fixture archive, in order: archive_format, archive_version,
/// program.fb (from `program`), weights/0..2.
std::vector<RawEntry> fixture_entries(const fbs::ProgramT& program);

/// The fixture's entries with weight 2 ('count') turned into a bool[2] weight holding
/// `bytes` (for the checks that bool weights hold only bytes 0 and 1).
std::vector<RawEntry> fixture_entries_with_bool_weight(std::vector<uint8_t> bytes);

/// Writes `entries` with pt2rt::write_archive (STORED, 64-byte aligned) and returns the
/// archive bytes. Every entry must have deflate == false.
std::vector<uint8_t> build_aligned(const std::vector<RawEntry>& entries);
/// Writes `entries` with libzip directly: no alignment padding, DEFLATE where asked.
std::vector<uint8_t> build_raw_zip(const std::vector<RawEntry>& entries);

/// The valid fixture archive's bytes.
std::vector<uint8_t> fixture_archive();

/// Replaces every occurrence of `from` by `to` (same length) in `bytes`; returns the count.
size_t patch_all(std::vector<uint8_t>& bytes, const std::string& from, const std::string& to);

/// A fresh directory under the system temp dir, removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  /// Names of the directory's entries (without "." and ".."), sorted.
  std::vector<std::string> list() const;

 private:
  std::string path_;
};

std::vector<uint8_t> read_file(const std::string& path);
void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

/// The whole load path: Archive::from_bytes, read_program, load_weights on CPU.
void load_all(const std::vector<uint8_t>& archive_bytes);

/// Local headers of a zip, walked sequentially from offset 0 (test-side parser, independent
/// of the loader's): for each entry, its name, method and data offset.
struct LocalHeader {
  std::string name;
  uint16_t method = 0;
  uint64_t data_offset = 0;
  uint64_t compressed_size = 0;
};
std::vector<LocalHeader> walk_local_headers(const std::vector<uint8_t>& zip);

}  // namespace pt2rt::test
