// tests/cpp/runtime/cross_expectations.h — what each fixture model must do on a runtime of
// another torch version (tests/cross/run.sh runs each lane's runtime tests on the other lane's
// fixtures).
//
// An archive exported by one torch runs on the other lane's LibTorch with parity, or its load
// fails with ONE OpResolutionError whose missing() list is exactly the expected one. The table
// is explicit per (model, exporting torch major, running torch major); a model absent from it
// must run with parity, so a runtime that started refusing everything fails the tests.
#pragma once

#include <string>
#include <vector>

namespace pt2rt::test {

/// The sorted OpResolutionError::missing() list expected when `model`, exported by torch
/// `exported_torch` ("2.14.1+debian"), is loaded by a LibTorch of version `running_torch`;
/// empty when it must load and match eager PyTorch.
std::vector<std::string> expected_missing(const std::string& model,
                                          const std::string& exported_torch,
                                          const std::string& running_torch);

}  // namespace pt2rt::test
