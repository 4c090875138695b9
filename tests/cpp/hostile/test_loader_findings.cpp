// Regression tests of issue 8's loader findings (#2, #4, #5, #6, #7, #8), each on a reproducer
// that reproducers.cpp generates. Tagged [hostile]; each fails on the code before the fix.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "catch_compat.h"
#include "fixture.h"
#include "pt2rt/archive.h"
#include "pt2rt/archive_writer.h"
#include "pt2rt/constants.h"
#include "pt2rt/errors.h"
#include "pt2rt/program.h"
#include "pt2rt_generated.h"
#include "reproducers.h"
#include "resource_guard.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

TEST_CASE("hostile #2: a union argument whose type is set but whose value is absent is a FormatError",
          "[hostile][loader]") {
  const Bytes program = absent_union_program();
  CHECK_THROWS_AS(decode_program(program.data(), program.size()), FormatError);
  CHECK_THROWS_WITH(decode_program(program.data(), program.size()),
                    Contains("argument 'self' is a TensorRef without a value"));
}

TEST_CASE("hostile #4: a 502-byte archive declaring a 4 GB DEFLATE program.fb allocates nothing",
          "[hostile][loader]") {
  const Bytes zip = deflate_program_archive(0xfffffff0u);
  CHECK(zip.size() < 1024);
  AddressSpaceLimit limit(uint64_t{512} << 20);  // a 4 GB buffer would throw std::bad_alloc
  const Archive a = Archive::from_bytes(zip.data(), zip.size());
  CHECK_THROWS_WITH(read_program(a), Contains("'program.fb' is compressed"));
  // Reading it anyway (a compressed entry, asked for with a large limit) grows the buffer only
  // as inflated bytes arrive, and finds the lie.
  CHECK_THROWS_WITH(a.read(kProgramEntry, uint64_t{1} << 33), Contains("short read"));
  CHECK_THROWS_WITH(a.read(kProgramEntry), Contains("more than the limit"));
}

TEST_CASE("hostile #4: a DEFLATE program.fb is refused by every reader, even a valid one",
          "[hostile][loader]") {
  const Bytes zip = deflated_fixture_archive();
  const Archive a = Archive::from_bytes(zip.data(), zip.size());
  CHECK_THROWS_WITH(read_program_bytes(a), Contains("'program.fb' is compressed"));
  CHECK_THROWS_WITH(read_program(a), Contains("'program.fb' is compressed"));
}

TEST_CASE("hostile #5: K references to one L-byte string are refused, not decoded into K*L bytes",
          "[hostile][loader]") {
  // 16384 values naming one 64 KiB string: 1 GiB once copied; the program is ~400 KB.
  const Bytes program = shared_string_program(16384, 65536);
  CHECK(program.size() < 500000);
  AddressSpaceLimit limit(uint64_t{512} << 20);
  const double t0 = thread_cpu_seconds();
  CHECK_THROWS_WITH(decode_program(program.data(), program.size()),
                    Contains("ArchiveLimits::max_decoded_bytes"));
  // Model::save's rewrite (UnPack/Pack) decodes first, within the same bound.
  CHECK_THROWS_WITH(drop_example_references(program.data(), program.size()),
                    Contains("ArchiveLimits::max_decoded_bytes"));
  CHECK(thread_cpu_seconds() - t0 < 2.0);  // complexity guard: linear work, not K*L
  // The bound is an option: a caller may allow more.
  ArchiveLimits generous;
  generous.max_decoded_bytes = uint64_t{1} << 20;
  CHECK_THROWS_WITH(decode_program(program.data(), program.size(), generous),
                    Contains("more than 1048576 bytes"));
}

TEST_CASE("hostile #6: validating InputMutation outputs, tangents and gradients is linear",
          "[hostile][loader]") {
  // 20000 parameters and buffers: a quadratic check does ~4 x 4e8 descriptor comparisons.
  const Bytes program = many_mutations_program(20000);
  const double t0 = thread_cpu_seconds();
  std::shared_ptr<const Program> p;
  REQUIRE_NOTHROW(p = decode_program(program.data(), program.size()));
  const double cpu = thread_cpu_seconds() - t0;
  CHECK(p->graphs.size() == 3);
  CHECK(cpu < 3.0);  // complexity guard (linear: ~0.5 s here), not a speed claim
}

TEST_CASE("hostile #7: packing bundled tensors stays within FlatBuffers' maximum alignment",
          "[hostile][loader]") {
  // FlatBufferBuilder asserts alignment <= FLATBUFFERS_MAX_ALIGNMENT (32) when it packs a
  // force_align'ed vector; Model::save repacks program.fb (drop_example_references).
  fbs::TensorDataT t;
  t.dtype = fbs::ScalarType::Float;
  t.sizes = {4};
  t.data.assign(16, 1);
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(fbs::TensorData::Pack(fbb, &t));
  CHECK(fbb.GetBufferMinAlignment() <= FLATBUFFERS_MAX_ALIGNMENT);
  const Bytes fixture = pack(*make_program());
  const Bytes dropped = drop_example_references(fixture.data(), fixture.size());
  CHECK(decode_program(dropped.data(), dropped.size())->examples.size() == 1);
}

TEST_CASE("hostile #8: a vector of 8-byte scalars off its alignment is refused",
          "[hostile][loader]") {
  const Bytes program = misaligned_int64_program();
  CHECK_THROWS_WITH(decode_program(program.data(), program.size()),
                    Contains("is not 8-byte aligned"));
}

TEST_CASE("hostile #8: entry names outside the archive layout are refused at open",
          "[hostile][loader]") {
  for (const std::string name : {"extra/../../etc/x", "../../etc/x", "/etc/x", "extra/a\\b",
                                 "extra/", "extra//x", "weights/./0", "junk", "optimizer/",
                                 "optimizer/../x", "optimizers/0"}) {
    INFO(name);
    const Bytes zip = extra_entry_archive(name);
    CHECK_THROWS_WITH(Archive::from_bytes(zip.data(), zip.size()),
                      Contains("outside the archive layout"));
  }
  const Bytes ok = extra_entry_archive("extra/model card/README.md");
  CHECK_NOTHROW(Archive::from_bytes(ok.data(), ok.size()));
  const Bytes state = extra_entry_archive("optimizer/0");  // schema 1.3: the training state
  CHECK_NOTHROW(Archive::from_bytes(state.data(), state.size()));
}

TEST_CASE("hostile (fuzz): a zip entry with an empty name is a FormatError", "[hostile][loader]") {
  // Under UBSan (tests/fuzz, where this reproducer is a seed) the central-directory walk
  // passed a null pointer to memcmp for it.
  const Bytes zip = empty_name_zip();
  CHECK_THROWS_AS(Archive::from_bytes(zip.data(), zip.size()), FormatError);
}

namespace {

/// Names of `dir`'s entries that start with `prefix`.
std::vector<std::string> with_prefix(const TempDir& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const std::string& n : dir.list()) {
    if (n.rfind(prefix, 0) == 0) out.push_back(n);
  }
  return out;
}

}  // namespace

TEST_CASE("hostile #8: temp files of saves killed midway are removed by the next save",
          "[hostile][loader]") {
  TempDir dir;
  const std::string target = dir.file("model.pt2");
  const Bytes small = fixture_archive();
  const NewEntry entry{"data", {small.data(), small.size()}};

  // 20 saves killed with SIGKILL while writing a 64 MiB entry.
  const std::vector<uint8_t> big(uint64_t{64} << 20, 7);
  int killed = 0;
  for (int i = 0; i < 20; ++i) {
    const std::vector<std::string> before = with_prefix(dir, ".model.pt2.");
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      for (;;) write_archive(target, {{"big", {big.data(), big.size()}}});
    }
    // Wait until it has made a temp file of its own, then kill it.
    auto has_new = [&] {
      for (const std::string& n : with_prefix(dir, ".model.pt2.")) {
        if (std::find(before.begin(), before.end(), n) == before.end()) return true;
      }
      return false;
    };
    for (int spin = 0; spin < 5000 && !has_new(); ++spin) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    killed += WIFSIGNALED(status);
  }
  CHECK(killed == 20);
  CHECK_FALSE(with_prefix(dir, ".model.pt2.pt2rt-tmp-").empty());

  // A live save's temp file (locked), and another program's file of a similar name.
  const std::string live = dir.file(".model.pt2.pt2rt-tmp-LIVE01");
  const int live_fd = ::open(live.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  REQUIRE(live_fd >= 0);
  REQUIRE(::flock(live_fd, LOCK_EX) == 0);
  write_file(dir.file(".model.pt2.tmp-OTHER1"), {1});
  write_file(dir.file(".model.pt2.pt2rt-tmp-toolong1"), {1});

  write_archive(target, {entry});
  CHECK(with_prefix(dir, ".model.pt2.pt2rt-tmp-") ==
        std::vector<std::string>{".model.pt2.pt2rt-tmp-LIVE01", ".model.pt2.pt2rt-tmp-toolong1"});
  CHECK(dir.list().size() == 4);  // the model, the live temp file and the two foreign files
  ::close(live_fd);
}
