// tests/cpp/loader/test_writer.cpp — archive writer: alignment, copies, atomic saves,
// dropping example references, save_weights round trip.
#include "catch_compat.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "fixture.h"
#include "pt2rt/archive.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/program.h"
#include "pt2rt/weights.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

namespace {

std::vector<uint8_t> filled(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7);
  return v;
}

EntryBytes view(const std::vector<uint8_t>& v) { return {v.data(), v.size()}; }

}  // namespace

TEST_CASE("writer: every entry STORED with data 64-byte aligned", "[loader][writer]") {
  const std::vector<std::pair<std::string, std::vector<uint8_t>>> content = {
      {"archive_format", {'p', 't', '2', 'r', 't'}},
      {"a", filled(1, 1)},
      {"bb/ccc", filled(0, 0)},
      {"weights/0", filled(63, 2)},
      {"weights/1", filled(64, 3)},
      {"weights/22", filled(65, 4)},
      {"extra/" + std::string(100, 'n'), filled(100003, 5)},
      {"z", filled(7, 6)},
  };
  std::vector<NewEntry> entries;
  for (const auto& [name, bytes] : content) entries.push_back({name, view(bytes)});
  TempDir dir;
  write_archive(dir.file("x.zip"), entries);
  const std::vector<uint8_t> file = read_file(dir.file("x.zip"));

  // Test-side walk of the local headers: every entry STORED, data on a 64-byte boundary.
  const std::vector<LocalHeader> headers = walk_local_headers(file);
  REQUIRE(headers.size() == content.size());
  for (size_t i = 0; i < headers.size(); ++i) {
    INFO(headers[i].name);
    CHECK(headers[i].name == content[i].first);
    CHECK(headers[i].method == 0);
    CHECK(headers[i].data_offset % 64 == 0);
    CHECK(headers[i].compressed_size == content[i].second.size());
    CHECK(std::equal(content[i].second.begin(), content[i].second.end(),
                     file.begin() + static_cast<std::ptrdiff_t>(headers[i].data_offset)));
  }
  CHECK(dir.list() == std::vector<std::string>{"x.zip"});  // no temp file left
}

TEST_CASE("writer: copy of an archive with replaced and appended entries", "[loader][writer]") {
  std::vector<RawEntry> src_entries = fixture_entries(*make_program());
  src_entries.push_back({"extra/card.md", filled(5000, 9), /*deflate=*/true});
  TempDir dir;
  write_file(dir.file("src.pt2"), build_raw_zip(src_entries));
  Archive src = Archive::open(dir.file("src.pt2"));
  const std::vector<uint8_t> new_w = filled(24, 42), added = filled(10, 1);
  write_archive_copy(dir.file("dst.pt2"), src,
                     {{"weights/0", view(new_w)}, {"extra/new.txt", view(added)}});
  Archive dst = Archive::open(dir.file("dst.pt2"));
  std::vector<std::string> names;
  for (const EntryInfo& e : dst.entries()) {
    names.push_back(e.name);
    CHECK(e.stored);
    CHECK(e.data_offset % kDataAlignment == 0);
  }
  const std::vector<std::string> expected = {"archive_format", "archive_version", "program.fb",
                                             "weights/0",      "weights/1",       "weights/2",
                                             "extra/card.md",  "extra/new.txt"};
  CHECK(names == expected);
  CHECK(dst.read("weights/0") == new_w);
  CHECK(dst.read("weights/1") == fixture_weight_bytes(1));
  CHECK(dst.read("extra/card.md") == filled(5000, 9));  // was DEFLATE, now STORED
  CHECK(dst.read("extra/new.txt") == added);
  CHECK(dst.read(kProgramEntry) == src.read(kProgramEntry));
  CHECK_THROWS_WITH(write_archive_copy(dir.file("bad.pt2"), src, {{"a", view(added)}, {"a", view(added)}}),
                    Contains("replaced twice"));
}

TEST_CASE("writer: saving over the source's own file", "[loader][writer]") {
  TempDir dir;
  const std::string path = dir.file("m.pt2");
  write_file(path, fixture_archive());
  Archive src = Archive::open(path);
  const std::vector<uint8_t> new_w = filled(24, 3);
  write_archive_copy(path, src, {{"weights/0", view(new_w)}});
  CHECK(src.read("weights/0") == fixture_weight_bytes(0));  // the open archive keeps the old file
  CHECK(Archive::open(path).read("weights/0") == new_w);
  CHECK(dir.list() == std::vector<std::string>{"m.pt2"});
}

TEST_CASE("writer: a save that fails halfway leaves the target intact and no temp file", "[loader][writer]") {
  TempDir dir;
  const std::string path = dir.file("m.pt2");
  const std::vector<uint8_t> original = fixture_archive();
  write_file(path, original);
  Archive src = Archive::open(path);
  const std::vector<uint8_t> new_w = filled(24, 5);
  for (uint64_t fail_after : {uint64_t{0}, uint64_t{1}, uint64_t{100}, uint64_t{original.size() / 2},
                              uint64_t{original.size() - 1}}) {
    INFO("write fails after " << fail_after << " bytes");
    WriteOptions options;
    options.fail_after_bytes = fail_after;
    CHECK_THROWS_WITH(write_archive_copy(path, src, {{"weights/0", view(new_w)}}, options),
                      Contains("cannot write '" + path + "'"));
    CHECK(read_file(path) == original);
    CHECK(dir.list() == std::vector<std::string>{"m.pt2"});
  }
  // A failed first save of a new file leaves nothing at all.
  WriteOptions options;
  options.fail_after_bytes = 500;
  CHECK_THROWS_AS(write_archive(dir.file("new.pt2"), {{"a", view(new_w)}, {"b", view(original)}}, options), Error);
  CHECK(dir.list() == std::vector<std::string>{"m.pt2"});
  // The same save without the injected failure goes through.
  write_archive_copy(path, src, {{"weights/0", view(new_w)}});
  CHECK(Archive::open(path).read("weights/0") == new_w);
}

TEST_CASE("writer: errors name the target and the problem", "[loader][writer]") {
  const std::vector<uint8_t> b = filled(3, 0);
  CHECK_THROWS_WITH(write_archive("/nonexistent-pt2rt-dir/m.pt2", {{"a", view(b)}}),
                    Contains("cannot write '/nonexistent-pt2rt-dir/m.pt2'") && Contains("temp file"));
  TempDir dir;
  CHECK_THROWS_WITH(write_archive(dir.file("m.pt2"), {{"a", view(b)}, {"a", view(b)}}),
                    Contains("duplicate entry name 'a'"));
  CHECK(dir.list().empty());
}

TEST_CASE("writer: drop_example_references keeps inputs, drops references", "[loader][writer]") {
  const std::vector<uint8_t> with_refs = pack(*make_program());
  const std::vector<uint8_t> dropped = drop_example_references(with_refs.data(), with_refs.size());
  auto p = decode_program(dropped.data(), dropped.size());
  REQUIRE(p->examples.size() == 1);
  CHECK_FALSE(p->examples[0].references.has_value());
  CHECK(p->examples[0].inputs.size() == 1);
  CHECK(p->examples[0].inputs[0].data.size() == 24);
  CHECK(p->weights.size() == 3);
  CHECK(p->graphs.size() == 3);
  // Nothing to drop: the very same bytes.
  CHECK(drop_example_references(dropped.data(), dropped.size()) == dropped);
  // A newer minor is stamped with this build's version (its new fields did not survive).
  auto newer = make_program();
  newer->schema_version->minor = 9;
  const std::vector<uint8_t> nb = pack(*newer);
  const std::vector<uint8_t> nd = drop_example_references(nb.data(), nb.size());
  CHECK(decode_program(nd.data(), nd.size())->schema_minor == kSchemaMinor);
  const std::vector<uint8_t> junk = filled(64, 1);
  CHECK_THROWS_AS(drop_example_references(junk.data(), junk.size()), FormatError);
}

TEST_CASE("writer: save_weights round trip", "[loader][writer]") {
  TempDir dir;
  write_file(dir.file("m.pt2"), fixture_archive());
  Archive src = Archive::open(dir.file("m.pt2"));
  auto program = read_program(src);
  std::vector<at::Tensor> w = load_weights(src, *program, c10::kCPU);
  {
    at::NoGradGuard no_grad;
    w[0].add_(1.0);
    w[2].fill_(8);
  }
  save_weights(dir.file("tuned.pt2"), src, *program, w);
  Archive tuned = Archive::open(dir.file("tuned.pt2"));
  auto tuned_program = read_program(tuned);
  CHECK_FALSE(tuned_program->examples.at(0).references.has_value());
  CHECK(tuned_program->examples.at(0).inputs.size() == 1);
  std::vector<at::Tensor> w2 = load_weights(tuned, *tuned_program, c10::kCPU);
  REQUIRE(w2.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(at::equal(w[i], w2[i]));
  CHECK(w2[2].item<int64_t>() == 8);
  for (const EntryInfo& e : tuned.entries()) CHECK(e.data_offset % kDataAlignment == 0);

  CHECK_THROWS_AS(save_weights(dir.file("x.pt2"), src, *program, {w[0]}), InputError);
  CHECK_THROWS_WITH(save_weights(dir.file("x.pt2"), src, *program, {w[0], w[1], w[0]}),
                    Contains("weight 'count': tensor is Float[2, 3], the archive records Long[]"));
  CHECK((dir.list() == std::vector<std::string>{"m.pt2", "tuned.pt2"}));
}
