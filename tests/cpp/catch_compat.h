// tests/cpp/catch_compat.h — the one place where Catch2 v2 (Debian bookworm, the torch 1.13
// lane) and Catch2 v3 (Debian sid, the torch 2.x lane) differ for pt2rt's tests. Test files
// include this header instead of Catch2's own.
//
//   Contains(text)                 substring matcher (v2: Matchers::Contains,
//                                  v3: Matchers::ContainsSubstring)
//   register_test_case(...)        registers a test case at static-initialization time, for
//                                  table-driven tests that want one ctest entry per row
//                                  (both versions' Catch::AutoReg, whose signature differs)
#pragma once

#include <cstddef>

// c10/util/Logging.h defines glog-style CHECK macros. Included here first, its CHECK is
// dropped before Catch defines its own; the header's include guard keeps any later inclusion
// (through ATen or torch headers, in whatever order a test includes them) from defining it
// again. Otherwise a test that includes a LibTorch header after this one gets c10's CHECK:
// not counted by Catch, and a failure aborts instead of being reported.
#include <c10/util/Logging.h>
#undef CHECK

// PT2RT_CATCH2_V3 comes from CMake (the Catch2 it found), not from __has_include: a machine
// may have another major version's headers on its system include path.
#if defined(PT2RT_CATCH2_V3) ? PT2RT_CATCH2_V3 : __has_include(<catch2/catch_test_macros.hpp>)
#include <catch2/catch_test_macros.hpp>
#include <catch2/internal/catch_test_registry.hpp>
#include <catch2/matchers/catch_matchers_predicate.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#undef PT2RT_CATCH2_V3
#define PT2RT_CATCH2_V3 1
#else  // Catch2 v2
#include <catch2/catch.hpp>
#undef PT2RT_CATCH2_V3
#define PT2RT_CATCH2_V3 0
#endif

namespace pt2rt::test {

/// Matches strings containing `text` (case-sensitive).
inline auto Contains(const std::string& text) {
#if PT2RT_CATCH2_V3
  return Catch::Matchers::ContainsSubstring(text);
#else
  return Catch::Matchers::Contains(text);
#endif
}

/// Registers test case `name` with `tags`, running `run(index)`. `name` and `tags` must
/// outlive the test run (string literals or static storage: Catch keeps StringRefs).
inline void register_test_case(const char* name, const char* tags, void (*run)(size_t),
                               size_t index) {
  struct Invoker : Catch::ITestInvoker {
    Invoker(void (*r)(size_t), size_t i) : run(r), index(i) {}
    void invoke() const override { run(index); }
    void (*run)(size_t);
    size_t index;
  };
#if PT2RT_CATCH2_V3
  static_cast<void>(Catch::AutoReg(Catch::Detail::unique_ptr<Catch::ITestInvoker>(
                                       new Invoker(run, index)),
                                   CATCH_INTERNAL_LINEINFO, Catch::StringRef(),
                                   Catch::NameAndTags{name, tags}));
#else
  static_cast<void>(Catch::AutoReg(new Invoker(run, index), CATCH_INTERNAL_LINEINFO,
                                   Catch::StringRef(), Catch::NameAndTags{name, tags}));
#endif
}

}  // namespace pt2rt::test
