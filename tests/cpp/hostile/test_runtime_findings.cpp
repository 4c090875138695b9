// Regression tests of issue 8's runtime findings (#1, #3, #8) and of the view bounds, each on a
// reproducer that reproducers.cpp generates. Tagged [hostile].
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include "catch_compat.h"
#include "fixture.h"
#include "pt2rt/archive.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"
#include "reproducers.h"
#include "resource_guard.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

namespace {

Model load_bytes(const Bytes& b, const LoadOptions& options = {}) {
  return Model::load(b.data(), b.size(), c10::kCPU, options);
}

bool has_op(const char* name, const char* overload = "") {
  return c10::Dispatcher::singleton().findSchema({name, overload}).has_value();
}

Bytes text_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

}  // namespace

TEST_CASE("hostile #1: aten::from_file and an in-place fill_ are refused at load, both named",
          "[hostile][runtime][policy]") {
  TempDir dir;
  const std::string victim = dir.file("victim.txt");
  write_file(victim, text_bytes("secret"));
  const Bytes archive = from_file_fill_archive(victim, 6);
  try {
    Model m = load_bytes(archive);
    m.forward({});  // what the archive wants: read the victim, overwrite it with 'A's
    FAIL("the archive loaded");
  } catch (const OpResolutionError& e) {
    const std::string what = e.what();
    CHECK_THAT(what, Contains("2 operators are refused by pt2rt's operator policy"));
    CHECK_THAT(what, Contains("aten::from_file: maps or reads a file"));
    CHECK_THAT(what, Contains("aten::fill_.Scalar: writes to its argument 'self'"));
  }
  CHECK(read_file(victim) == text_bytes("secret"));
}

TEST_CASE("hostile #1: LoadOptions::allow_operators admits refused ops by name",
          "[hostile][runtime][policy]") {
  // A trusted archive with a custom-looking need: allow only fill_, from_file stays refused.
  TempDir dir;
  const Bytes archive = from_file_fill_archive(dir.file("absent"), 1);
  LoadOptions options;
  options.allow_operators = {"aten::fill_.Scalar"};
  CHECK_THROWS_WITH(load_bytes(archive, options), Contains("1 operator is refused"));
  CHECK_THROWS_WITH(load_bytes(archive, options), Contains("aten::from_file"));
}

TEST_CASE("hostile #3: SymInt overflow and division by zero are errors, never traps or wraps",
          "[hostile][runtime]") {
  struct Case {
    const char* op;
    int64_t a, b;
    const char* message;
  };
  const Case cases[] = {
      {"floordiv", INT64_MIN, -1, "overflows int64"},  // SIGFPE before the fix
      {"floordiv", 7, 0, "division by zero"},
      {"mod", 7, 0, "modulo by zero"},
      {"add", INT64_MAX, 1, "overflows int64"},
      {"sub", INT64_MIN, 1, "overflows int64"},
      {"mul", INT64_MAX, 2, "overflows int64"},
      {"neg", INT64_MIN, 0, "overflows int64"},
  };
  for (const Case& c : cases) {
    INFO(c.op << "(" << c.a << ", " << c.b << ")");
    // The meta check at load runs sym:: ops on the constants: the error comes at load.
    CHECK_THROWS_AS(load_bytes(sym_arith_archive(c.op, c.a, c.b)), Error);
    CHECK_THROWS_WITH(load_bytes(sym_arith_archive(c.op, c.a, c.b)), Contains(c.message));
  }
  // INT64_MIN % -1 is 0 in Python (and would trap in C++): no error, the right value.
  Model m = load_bytes(sym_arith_archive("mod", INT64_MIN, -1));
  CHECK(m.forward({at::ones({2})})[0].equal(at::zeros({2})));
}

TEST_CASE("hostile #8: a backward graph's tangents must declare their shapes",
          "[hostile][runtime]") {
  // bind_inputs makes zeros of a Tangent's declared shape when its gradient never arrives;
  // without a meta that was a null optional dereference.
  CHECK_THROWS_WITH(load_bytes(tangent_without_meta_archive()),
                    Contains("declares no tensor shape (needed for a zero cotangent)"));
}

TEST_CASE("hostile #8: sparse, mkldnn and quantized inputs are refused", "[hostile][runtime]") {
  Model m = load_bytes(fixture_archive());
  const at::Tensor dense = at::ones({2, 3});
  CHECK_NOTHROW(m.forward({dense}));
  CHECK_THROWS_AS(m.forward({dense.to_sparse()}), InputError);
  CHECK_THROWS_WITH(m.forward({dense.to_sparse()}), Contains("only strided, dense tensors"));
  CHECK_THROWS_AS(m.forward({at::quantize_per_tensor(dense, 0.1, 0, at::kQUInt8)}), InputError);
}

TEST_CASE("hostile: a view past its storage (unchecked _reshape_alias) is refused at load",
          "[hostile][runtime]") {
  if (!has_op("aten::_reshape_alias")) {
    WARN("aten::_reshape_alias is not in this LibTorch: nothing to check");
    return;
  }
  AddressSpaceLimit limit(uint64_t{256} << 20);
  CHECK_THROWS_AS(load_bytes(reshape_alias_archive(1 << 20)), FormatError);
  CHECK_THROWS_WITH(load_bytes(reshape_alias_archive(1 << 20)),
                    Contains("reaches past the 8 bytes of its storage"));
}

TEST_CASE("hostile: a view of a caller's input is checked against its storage at every run",
          "[hostile][runtime]") {
  if (!has_op("aten::_reshape_alias")) {
    WARN("aten::_reshape_alias is not in this LibTorch: nothing to check");
    return;
  }
  Model m = load_bytes(reshape_alias_archive(2));  // x[2] -> _reshape_alias(x, [2], [1])
  CHECK(m.forward({at::ones({2})})[0].equal(at::ones({2})));
  // Same sizes, but a storage of one element (expand): the view would read past it.
  CHECK_THROWS_AS(m.forward({at::ones({1}).expand({2})}), ExecutionError);
  CHECK_THROWS_WITH(m.forward({at::ones({1}).expand({2})}), Contains("reaches past the 4 bytes"));
}
