// tests/cpp/loader/test_archive.cpp — Archive: opening checks, reads, bad archives.
#include "catch_compat.h"

#include <sys/stat.h>

#include <algorithm>
#include <thread>

#include "fixture.h"
#include "pt2rt/archive.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/program.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

namespace {

std::vector<uint8_t> text(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

Archive open_bytes(const std::vector<uint8_t>& b) { return Archive::from_bytes(b.data(), b.size()); }

/// The fixture entries with entry `name` replaced (or removed when `bytes` is null).
std::vector<RawEntry> entries_with(const std::string& name, const std::vector<uint8_t>* bytes) {
  std::vector<RawEntry> out;
  for (RawEntry& e : fixture_entries(*make_program())) {
    if (e.name != name) {
      out.push_back(std::move(e));
    } else if (bytes != nullptr) {
      out.push_back({name, *bytes});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("archive: fixture opens from memory and from a path alike", "[loader][archive]") {
  const std::vector<uint8_t> bytes = fixture_archive();
  TempDir dir;
  write_file(dir.file("m.pt2"), bytes);
  Archive a = Archive::open(dir.file("m.pt2"));
  Archive b = open_bytes(bytes);
  CHECK(a.source() == dir.file("m.pt2"));
  CHECK(b.source() == "<memory>");
  REQUIRE(a.entries().size() == 6);
  REQUIRE(a.entries().size() == b.entries().size());
  for (size_t i = 0; i < a.entries().size(); ++i) {
    const EntryInfo& x = a.entries()[i];
    const EntryInfo& y = b.entries()[i];
    CHECK(x.name == y.name);
    CHECK(x.size == y.size);
    CHECK(x.stored);
    CHECK(x.data_offset == y.data_offset);
    CHECK(x.data_offset % kDataAlignment == 0);
    CHECK(x.crc == y.crc);
    CHECK(a.read(x.name) == b.read(y.name));
  }
  CHECK(a.read(kArchiveFormatEntry) == text("pt2rt"));
  CHECK(a.has_entry("weights/2"));
  CHECK_FALSE(a.has_entry("weights/3"));
  CHECK_THROWS_AS(a.entry("weights/3"), FormatError);
  // The data offsets are where a test-side walk of the local headers finds the data.
  const auto headers = walk_local_headers(bytes);
  REQUIRE(headers.size() == a.entries().size());
  for (size_t i = 0; i < headers.size(); ++i) CHECK(headers[i].data_offset == a.entries()[i].data_offset);
}

TEST_CASE("archive: read limits and read_into size checks", "[loader][archive]") {
  const std::vector<uint8_t> bytes = fixture_archive();
  Archive a = open_bytes(bytes);
  CHECK_THROWS_WITH(a.read("weights/0", 23), Contains("weights/0") && Contains("24 bytes") && Contains("limit of 23"));
  CHECK(a.read("weights/0", 24).size() == 24);
  std::vector<uint8_t> dst(32);
  CHECK_THROWS_WITH(a.read_into("weights/0", dst.data(), 20), Contains("has 24 bytes, expected 20"));
  CHECK_THROWS_WITH(a.read_into("weights/0", dst.data(), 28), Contains("has 24 bytes, expected 28"));
  a.read_into("weights/0", dst.data() + 3, 24);  // any alignment
  CHECK(std::vector<uint8_t>(dst.begin() + 3, dst.begin() + 27) == fixture_weight_bytes(0));
  CHECK_THROWS_WITH(a.read("nope"), Contains("missing entry 'nope'"));
}

TEST_CASE("archive: concurrent reads from one Archive", "[loader][archive]") {
  const std::vector<uint8_t> bytes = fixture_archive();
  Archive a = open_bytes(bytes);
  const std::vector<uint8_t> program = a.read(kProgramEntry);
  std::vector<int> ok(8, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::vector<uint8_t> w(24);
        a.read_into("weights/0", w.data(), w.size());
        ok[t] += a.read(kProgramEntry) == program && w == fixture_weight_bytes(0);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) CHECK(ok[t] == 50);
}

TEST_CASE("archive: compressed non-weight entries are readable", "[loader][archive]") {
  std::vector<RawEntry> entries = fixture_entries(*make_program());
  entries.push_back({"extra/notes.txt", text(std::string(1000, 'a')), /*deflate=*/true});
  const std::vector<uint8_t> bytes = build_raw_zip(entries);
  Archive a = open_bytes(bytes);
  CHECK_FALSE(a.entry("extra/notes.txt").stored);
  CHECK(a.entry("extra/notes.txt").method == 8);
  CHECK(a.read("extra/notes.txt") == text(std::string(1000, 'a')));
}

// ---- bad input: archive level --------------------------------------------------------

TEST_CASE("bad input: not a zip", "[loader][bad-input]") {
  const std::vector<uint8_t> junk = text("this is not a zip archive, just some text bytes");
  CHECK_THROWS_WITH(open_bytes(junk), Contains("<memory>") && Contains("not a zip archive"));
  TempDir dir;
  write_file(dir.file("junk.pt2"), junk);
  CHECK_THROWS_AS(Archive::open(dir.file("junk.pt2")), FormatError);
  CHECK_THROWS_WITH(Archive::open(dir.file("junk.pt2")), Contains(dir.file("junk.pt2")) && Contains("not a zip"));
  write_file(dir.file("empty.pt2"), {});
  CHECK_THROWS_WITH(Archive::open(dir.file("empty.pt2")), Contains("empty file"));
  CHECK_THROWS_WITH(Archive::open(dir.file("missing.pt2")), Contains("missing.pt2") && Contains("cannot open"));
  CHECK_THROWS_WITH(Archive::open(dir.path()), Contains("not a regular file"));
  REQUIRE(::mkfifo(dir.file("fifo").c_str(), 0600) == 0);  // must not block waiting for a writer
  CHECK_THROWS_WITH(Archive::open(dir.file("fifo")), Contains("not a regular file"));
}

TEST_CASE("bad input: wrong archive_format", "[loader][bad-input]") {
  const std::vector<uint8_t> pt2 = text("pt2");
  CHECK_THROWS_WITH(open_bytes(build_aligned(entries_with(kArchiveFormatEntry, &pt2))),
                    Contains("archive_format is 'pt2', expected 'pt2rt'"));
  CHECK_THROWS_WITH(open_bytes(build_aligned(entries_with(kArchiveFormatEntry, nullptr))),
                    Contains("missing entry 'archive_format'"));
}

TEST_CASE("bad input: future archive_version", "[loader][bad-input]") {
  const std::vector<uint8_t> two = text("2");
  CHECK_THROWS_WITH(open_bytes(build_aligned(entries_with(kArchiveVersionEntry, &two))),
                    Contains("archive_version '2' (major 2) is newer than this reader") &&
                        Contains("archive version 1"));
  const std::vector<uint8_t> minor = text("1.4\n");
  CHECK_NOTHROW(open_bytes(build_aligned(entries_with(kArchiveVersionEntry, &minor))));
  const std::vector<uint8_t> junk = text("v1");
  CHECK_THROWS_WITH(open_bytes(build_aligned(entries_with(kArchiveVersionEntry, &junk))),
                    Contains("is not a version number"));
  CHECK_THROWS_WITH(open_bytes(build_aligned(entries_with(kArchiveVersionEntry, nullptr))),
                    Contains("missing entry 'archive_version'"));
}

TEST_CASE("bad input: missing program.fb", "[loader][bad-input]") {
  CHECK_THROWS_WITH(open_bytes(build_aligned(entries_with(kProgramEntry, nullptr))),
                    Contains("missing entry 'program.fb'"));
}

TEST_CASE("bad input: duplicate entry name", "[loader][bad-input]") {
  std::vector<RawEntry> entries = fixture_entries(*make_program());
  entries.push_back({"weights/Z", fixture_weight_bytes(0)});
  std::vector<uint8_t> bytes = build_aligned(entries);
  REQUIRE(patch_all(bytes, "weights/Z", "weights/0") == 2);  // local header + central directory
  CHECK_THROWS_WITH(open_bytes(bytes), Contains("duplicate entry name 'weights/0'") && Contains("entries 3 and 6"));
}

TEST_CASE("bad input: truncated archive at many offsets", "[loader][bad-input]") {
  const std::vector<uint8_t> bytes = fixture_archive();
  REQUIRE_NOTHROW(load_all(bytes));
  std::vector<size_t> cuts = {0, 1, 4, 21, 22, 29, 30, 64, bytes.size() / 3, bytes.size() / 2,
                              bytes.size() - 200, bytes.size() - 60, bytes.size() - 23,
                              bytes.size() - 22, bytes.size() - 2, bytes.size() - 1};
  for (size_t c = 0; c < bytes.size(); c += 97) cuts.push_back(c);
  for (size_t cut : cuts) {
    INFO("truncated to " << cut << " of " << bytes.size() << " bytes");
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    CHECK_THROWS_AS(load_all(prefix), FormatError);
  }
}

TEST_CASE("bad input: corrupted weight bytes fail the CRC check", "[loader][bad-input]") {
  std::vector<uint8_t> bytes = fixture_archive();
  const uint64_t off = open_bytes(bytes).entry("weights/0").data_offset;
  bytes[off + 5] ^= 0xff;
  CHECK_THROWS_WITH(load_all(bytes), Contains("entry 'weights/0'") && Contains("CRC"));
}

TEST_CASE("bad input: STORED entry whose sizes disagree", "[loader][bad-input]") {
  // A stored entry claiming more uncompressed bytes than it stores could make a reader
  // allocate without bound; patch the central directory's uncompressed size of weights/0.
  std::vector<uint8_t> bytes = fixture_archive();
  const auto cd = std::search(bytes.begin(), bytes.end(), std::begin("PK\1\2"), std::end("PK\1\2") - 1);
  REQUIRE(cd != bytes.end());
  // Find the central record of weights/0 (4th record) and set its uncompressed size.
  size_t pos = static_cast<size_t>(cd - bytes.begin());
  for (int i = 0; i < 3; ++i) {
    const size_t n = bytes[pos + 28] | (bytes[pos + 29] << 8), m = bytes[pos + 30] | (bytes[pos + 31] << 8),
                 k = bytes[pos + 32] | (bytes[pos + 33] << 8);
    pos += 46 + n + m + k;
  }
  REQUIRE(std::string(bytes.begin() + static_cast<std::ptrdiff_t>(pos + 46),
                      bytes.begin() + static_cast<std::ptrdiff_t>(pos + 55)) == "weights/0");
  bytes[pos + 24 + 3] = 0x7f;  // uncompressed size ~2 GiB
  CHECK_THROWS_AS(load_all(bytes), FormatError);
}

TEST_CASE("bad input: any single corrupted byte gives FormatError or a valid load", "[loader][bad-input]") {
  // Every byte of the archive (zip structures, program.fb, weights) flipped in turn: the
  // load either succeeds (e.g. a float inside program.fb changed) or throws FormatError;
  // never another exception, a crash or a sanitizer report.
  const std::vector<uint8_t> bytes = fixture_archive();
  size_t loaded = 0, rejected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> b = bytes;
    b[i] ^= static_cast<uint8_t>(0x5a + i);
    try {
      load_all(b);
      ++loaded;
    } catch (const FormatError&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL("byte " << i << ": unexpected " << e.what());
    }
  }
  CHECK(loaded + rejected == bytes.size());
  CHECK(rejected > bytes.size() / 2);
}
