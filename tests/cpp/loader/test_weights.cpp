// tests/cpp/loader/test_weights.cpp — load_weights: values, layout, and bad weight entries.
#include "catch_compat.h"

#include <ATen/ATen.h>

#include "fixture.h"
#include "pt2rt/archive.h"
#include "pt2rt/errors.h"
#include "pt2rt/program.h"
#include "pt2rt/weights.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

namespace {

std::vector<at::Tensor> load(const std::vector<uint8_t>& bytes) {
  Archive a = Archive::from_bytes(bytes.data(), bytes.size());
  return load_weights(a, *read_program(a), c10::kCPU);
}

/// The fixture's entries with weights/0 holding `bytes`.
std::vector<RawEntry> with_w_bytes(std::vector<uint8_t> bytes) {
  std::vector<RawEntry> e = fixture_entries(*make_program());
  e[3].bytes = std::move(bytes);
  return e;
}

}  // namespace

TEST_CASE("weights: values, dtypes, shapes and leaf parameters", "[loader][weights]") {
  const std::vector<at::Tensor> w = load(fixture_archive());
  REQUIRE(w.size() == 3);
  const std::vector<float> expect = fixture_w_values();
  CHECK(w[0].scalar_type() == at::kFloat);
  CHECK(w[0].sizes() == at::IntArrayRef({2, 3}));
  CHECK(w[0].strides() == at::IntArrayRef({3, 1}));
  CHECK(at::equal(w[0], at::tensor(expect).reshape({2, 3})));
  CHECK(w[0].requires_grad());
  CHECK(w[0].is_leaf());
  CHECK(w[0].grad_fn() == nullptr);
  CHECK_FALSE(w[1].requires_grad());
  CHECK(at::equal(w[1], at::tensor({10.f, 20.f, 30.f})));
  CHECK(w[2].dim() == 0);
  CHECK(w[2].scalar_type() == at::kLong);
  CHECK(w[2].item<int64_t>() == 7);
  // Leaf parameters accumulate gradients like any LibTorch parameter.
  (w[0] * 2).sum().backward();
  CHECK(at::equal(w[0].grad(), at::full({2, 3}, 2.f)));
}

TEST_CASE("weights: strided weight with a storage offset", "[loader][weights]") {
  auto p = make_program();
  // A [2, 2] view with strides [1, 3] at offset 1 over a storage of 6 floats (24 bytes).
  p->weights[0]->sizes = {2, 2};
  p->weights[0]->strides = {1, 3};
  p->weights[0]->storage_offset = 1;
  const std::vector<uint8_t> bytes = build_aligned(fixture_entries(*p));
  const std::vector<at::Tensor> w = load(bytes);
  const std::vector<float> s = fixture_w_values();
  CHECK(w[0].strides() == at::IntArrayRef({1, 3}));
  CHECK(w[0].storage_offset() == 1);
  CHECK(at::equal(w[0], at::tensor({s[1], s[4], s[2], s[5]}).reshape({2, 2})));
  CHECK(w[0].is_leaf());
  CHECK(w[0].requires_grad());

  // weight_entry_bytes writes the same layout back (elements outside the view are zero).
  Archive a = Archive::from_bytes(bytes.data(), bytes.size());
  const auto program = read_program(a);
  const WeightInfo& info = program->weights[0];
  const at::Tensor entry = weight_entry_bytes(info, w[0]);
  CHECK(entry.numel() == 6);
  CHECK(at::equal(entry, at::tensor({0.f, s[1], s[2], 0.f, s[4], s[5]})));
  CHECK_THROWS_WITH(weight_entry_bytes(info, at::zeros({3, 2})),
                    Contains("weight 'w': tensor is Float[3, 2], the archive records Float[2, 2]"));
}

TEST_CASE("bad input: short weight entry", "[loader][bad-input]") {
  std::vector<uint8_t> b = fixture_weight_bytes(0);
  b.resize(20);
  CHECK_THROWS_WITH(load(build_aligned(with_w_bytes(b))),
                    Contains("weight 'w' (entry 'weights/0'): the entry has 20 bytes, expected 24 (Float x 6 storage elements)"));
}

TEST_CASE("bad input: long weight entry", "[loader][bad-input]") {
  std::vector<uint8_t> b = fixture_weight_bytes(0);
  b.resize(28);
  CHECK_THROWS_WITH(load(build_aligned(with_w_bytes(b))),
                    Contains("weight 'w' (entry 'weights/0'): the entry has 28 bytes, expected 24"));
}

TEST_CASE("bad input: missing weight entry", "[loader][bad-input]") {
  std::vector<RawEntry> e = fixture_entries(*make_program());
  e.pop_back();
  CHECK_THROWS_WITH(load(build_aligned(e)), Contains("weight 'count' (entry 'weights/2'): the entry is missing"));
}

TEST_CASE("bad input: compressed weight entry", "[loader][bad-input]") {
  std::vector<RawEntry> e = fixture_entries(*make_program());
  e[3].deflate = true;
  CHECK_THROWS_WITH(load(build_raw_zip(e)),
                    Contains("weight 'w' (entry 'weights/0'): the entry is compressed (zip method 8)"));
}

TEST_CASE("bad input: misaligned weight entry", "[loader][bad-input]") {
  const std::vector<uint8_t> bytes = build_raw_zip(fixture_entries(*make_program()));
  Archive a = Archive::from_bytes(bytes.data(), bytes.size());
  REQUIRE(a.entry("weights/0").data_offset % 64 != 0);  // plain libzip does not pad
  CHECK_THROWS_WITH(load_weights(a, *read_program(a), c10::kCPU),
                    Contains("weight 'w' (entry 'weights/0'): data at offset") && Contains("is not 64-byte aligned"));
}

TEST_CASE("bad input: overflowing sizes through the whole load path", "[loader][bad-input]") {
  auto p = make_program();
  p->weights[0]->sizes = {int64_t{1} << 62, 8};
  p->weights[0]->strides = {8, 1};
  CHECK_THROWS_WITH(load(build_aligned(fixture_entries(*p))), Contains("overflow"));
}

TEST_CASE("bad input: negative size through the whole load path", "[loader][bad-input]") {
  auto p = make_program();
  p->weights[1]->sizes = {-3};
  CHECK_THROWS_WITH(load(build_aligned(fixture_entries(*p))), Contains("weight 1 'frozen': negative size"));
}

TEST_CASE("bad input: bool weight holding a byte other than 0 or 1", "[loader][bad-input]") {
  CHECK_THROWS_WITH(load(build_aligned(fixture_entries_with_bool_weight({1, 2}))),
                    Contains("bool element 1 has byte value 2"));
  CHECK(load(build_aligned(fixture_entries_with_bool_weight({1, 0})))[2].equal(
      at::tensor({1, 0}).to(at::kBool)));
}

TEST_CASE("weights: a CUDA device without CUDA is an InputError", "[loader][weights]") {
  if (at::hasCUDA()) return;  // covered by the CUDA parity runs instead
  const std::vector<uint8_t> bytes = fixture_archive();
  Archive a = Archive::from_bytes(bytes.data(), bytes.size());
  CHECK_THROWS_AS(load_weights(a, *read_program(a), c10::Device("cuda:0")), InputError);
}
