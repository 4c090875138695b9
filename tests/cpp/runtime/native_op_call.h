// tests/cpp/runtime/native_op_call.h — calling a pt2rt:: native kernel directly in a test.
//
// `run(name, stack)` looks the op up in the native-op table (kernels/native_ops.h;
// REQUIREs that it exists) and runs its boxed kernel on `stack`, returning the stack (the
// results). `check_refused(name, stack, what)` runs it and checks that it throws c10::Error
// whose message contains `what` (the kernels' argument checks name what was wrong).
#pragma once

#include "catch_compat.h"

#include <ATen/core/stack.h>
#include <c10/util/Exception.h>

#include <string>

#include "kernels/native_ops.h"

namespace pt2rt::test {

inline torch::jit::Stack run(const char* name, torch::jit::Stack s) {
  const NativeOp* op = find_native_op(name, "");
  REQUIRE(op != nullptr);
  op->kernel(s);
  return s;
}

inline void check_refused(const char* name, torch::jit::Stack s, const std::string& what) {
  INFO(what);
  try {
    run(name, std::move(s));
    FAIL("accepted: " << what);
  } catch (const c10::Error& e) {
    CHECK_THAT(std::string(e.what_without_backtrace()), Contains(what));
  }
}

}  // namespace pt2rt::test
