// tests/cpp/loader/test_mapped_weights.cpp — map_weights: the same tensors as load_weights
// without reading the entries; private copy-on-write (the file never changes); the mapping
// outlives its MappedFile handle; the bad weight entries load_weights refuses, refused alike.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

// After the LibTorch headers: c10's logging defines a CHECK macro that Catch's must replace.
#include "catch_compat.h"
#include "fixture.h"
#include "pt2rt/archive.h"
#include "pt2rt/errors.h"
#include "pt2rt/mapped_file.h"
#include "pt2rt/mapped_weights.h"
#include "pt2rt/program.h"
#include "pt2rt/weights.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

namespace {

/// Writes `bytes` to a file in `dir`, maps it and maps its weights.
std::vector<at::Tensor> map_bytes(const TempDir& dir, const std::vector<uint8_t>& bytes) {
  const std::string path = dir.file("m.pt2");
  write_file(path, bytes);
  auto file = MappedFile::open(path);
  Archive a = Archive::open(file->fd_path());
  return map_weights(file, a, *read_program(a));
}

}  // namespace

TEST_CASE("mapped weights equal loaded weights, strided ones included", "[loader][mapped]") {
  TempDir dir;
  auto p = make_program();
  p->weights[0]->sizes = {2, 2};  // a [2, 2] view, strides [1, 3], offset 1, of 6 floats
  p->weights[0]->strides = {1, 3};
  p->weights[0]->storage_offset = 1;
  const std::vector<uint8_t> bytes = build_aligned(fixture_entries(*p));
  Archive a = Archive::from_bytes(bytes.data(), bytes.size());
  const std::vector<at::Tensor> loaded = load_weights(a, *read_program(a), c10::kCPU);
  const std::vector<at::Tensor> mapped = map_bytes(dir, bytes);
  REQUIRE(mapped.size() == loaded.size());
  for (size_t i = 0; i < mapped.size(); ++i) {
    INFO("weight " << i);
    CHECK(mapped[i].scalar_type() == loaded[i].scalar_type());
    CHECK(mapped[i].sizes() == loaded[i].sizes());
    CHECK(mapped[i].strides() == loaded[i].strides());
    CHECK(mapped[i].storage_offset() == loaded[i].storage_offset());
    CHECK(at::equal(mapped[i], loaded[i]));
    CHECK(mapped[i].is_leaf());
    CHECK(mapped[i].requires_grad() == loaded[i].requires_grad());
    CHECK(reinterpret_cast<uintptr_t>(mapped[i].storage().data()) % 64 == 0);
  }
}

TEST_CASE("mapped weights are private: in-place writes never reach the file", "[loader][mapped]") {
  TempDir dir;
  const std::vector<uint8_t> bytes = fixture_archive();
  std::vector<at::Tensor> w = map_bytes(dir, bytes);  // the MappedFile handle is gone already
  {
    c10::NoGradGuard g;
    w[0].mul_(10).add_(1);  // copy-on-write pages, still mapped
    w[2].fill_(-1);
  }
  const std::vector<float> s = fixture_w_values();
  CHECK(w[0].flatten()[5].item<float>() == s[5] * 10 + 1);
  CHECK(read_file(dir.file("m.pt2")) == bytes);  // the file is unchanged
  const std::vector<at::Tensor> again = map_bytes(dir, read_file(dir.file("m.pt2")));
  CHECK(at::equal(again[0], at::tensor(s).reshape({2, 3})));
  CHECK(again[2].item<int64_t>() == 7);
}

TEST_CASE("bad input: mapped weights refuse what load_weights refuses", "[loader][mapped][bad-input]") {
  TempDir dir;
  SECTION("short entry") {
    std::vector<RawEntry> e = fixture_entries(*make_program());
    e[3].bytes.resize(20);
    CHECK_THROWS_WITH(map_bytes(dir, build_aligned(e)),
                      Contains("weight 'w' (entry 'weights/0'): the entry has 20 bytes, expected 24"));
  }
  SECTION("compressed entry") {
    std::vector<RawEntry> e = fixture_entries(*make_program());
    e[3].deflate = true;
    CHECK_THROWS_WITH(map_bytes(dir, build_raw_zip(e)),
                      Contains("weight 'w' (entry 'weights/0'): the entry is compressed (zip method 8)"));
  }
  SECTION("misaligned entry") {
    CHECK_THROWS_WITH(map_bytes(dir, build_raw_zip(fixture_entries(*make_program()))),
                      Contains("is not 64-byte aligned"));
  }
  SECTION("bool weight with a byte other than 0 or 1") {
    CHECK_THROWS_WITH(map_bytes(dir, build_aligned(fixture_entries_with_bool_weight({1, 2}))),
                      Contains("bool element 1 has byte value 2"));
  }
  SECTION("not a file") {
    CHECK_THROWS_AS(MappedFile::open(dir.file("missing.pt2")), FormatError);
    CHECK_THROWS_WITH(MappedFile::open(dir.path()), Contains("not a regular file"));
  }
}
