// pt2rt's operator policy (runtime/plan/op_policy.h) on operators of the running LibTorch: what the
// exporter emits is allowed; files, in-place/out= ops, data-dependent shapes, side-effect-only
// ops, other namespaces and free-text str arguments are refused with the rule that refuses
// them. The dispatcher-wide counts are pt2rt_op_policy_report's (ctest op_policy_report).
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <optional>

#include "catch_compat.h"
#include "plan/op_policy.h"

using namespace pt2rt;
using pt2rt::test::Contains;

namespace {

std::optional<OpVerdict> verdict(const char* name, const char* overload = "") {
  auto h = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!h) return std::nullopt;
  return classify_operator(*h);
}

}  // namespace

TEST_CASE("op policy: the ops pt2rt's exporter emits are allowed", "[hostile][policy]") {
  const std::pair<const char*, const char*> emitted[] = {
      {"aten::addmm", ""}, {"aten::add", "Tensor"}, {"aten::mul", "Tensor"}, {"aten::mm", ""},
      {"aten::convolution", ""}, {"aten::convolution_backward", ""},
      {"aten::max_pool2d_with_indices", ""}, {"aten::max_pool2d_with_indices_backward", ""},
      {"aten::threshold_backward", ""}, {"aten::relu", ""}, {"aten::view", ""},
      {"aten::expand", ""}, {"aten::t", ""}, {"aten::sum", "dim_IntList"}, {"aten::mean", "dim"},
      {"aten::var", "correction"}, {"aten::div", "Scalar"}, {"aten::div", "Tensor_mode"},
      {"aten::gelu", ""}, {"aten::einsum", ""}, {"aten::index", "Tensor"},
      {"aten::native_dropout", ""}, {"aten::bernoulli", "p"}, {"aten::empty", "memory_format"},
      {"aten::zeros", ""}, {"aten::_to_copy", ""}, {"aten::clone", ""}};
  for (const auto& [name, overload] : emitted) {
    INFO(name << "." << overload);
    const auto v = verdict(name, overload);
    REQUIRE(v.has_value());
    CHECK(v->allowed);
    CHECK(v->reason == "");
  }
}

TEST_CASE("op policy: files, mutation, side effects and data-dependent shapes are refused",
          "[hostile][policy]") {
  struct Case {
    const char* name;
    const char* overload;
    const char* rule;
  };
  const Case cases[] = {
      {"aten::from_file", "", "denied"},
      {"aten::fill_", "Scalar", "mutates"},
      {"aten::add_", "Tensor", "mutates"},
      {"aten::mm", "out", "mutates"},
      {"aten::copy_", "", "mutates"},
      {"aten::set_", "source_Storage", "mutates"},
      {"aten::resize_", "", "mutates"},
      {"aten::nonzero", "", "dynamic-shape"},
      {"aten::masked_select", "", "dynamic-shape"},
      {"aten::_assert_async", "", "no-return"},
      {"aten::_sparse_coo_tensor_unsafe", "", "denied"},
      {"aten::sum", "dim_DimnameList", "argument-type"},
      {"aten::softmax", "Dimname", "str-argument"},
  };
  for (const Case& c : cases) {
    INFO(c.name << "." << c.overload);
    const auto v = verdict(c.name, c.overload);
    if (!v) continue;  // not in this LibTorch
    CHECK_FALSE(v->allowed);
    CHECK(v->rule == c.rule);
  }
  // Other namespaces (collectives, profiler, quantized, custom ops) are refused wholesale.
  size_t foreign = 0;
  for (const c10::OperatorName& n : c10::Dispatcher::singleton().getAllOpNames()) {
    if (n.name.rfind("aten::", 0) == 0) continue;
    auto h = c10::Dispatcher::singleton().findSchema(n);
    if (!h) continue;
    ++foreign;
    CHECK(classify_operator(*h).rule == "namespace");
  }
  CHECK(foreign > 0);
}

TEST_CASE("op policy: str arguments are mode selectors only", "[hostile][policy]") {
  const auto& names = mode_selector_names();
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(std::find(names.begin(), names.end(), "filename") == names.end());
  CHECK(std::find(names.begin(), names.end(), "rounding_mode") != names.end());
  // A schema alone: a made-up op reading a path.
  auto schema = c10::FunctionSchema(
      "aten::read_it", "", {c10::Argument("path", c10::StringType::get())},
      {c10::Argument("", c10::TensorType::get())});
  const OpVerdict v = classify_schema(schema, false);
  CHECK_FALSE(v.allowed);
  CHECK_THAT(v.reason, Contains("str argument 'path'"));
}

TEST_CASE("op policy: allow_operators names an op or one overload", "[hostile][policy]") {
  const c10::OperatorName fill("aten::fill_", "Scalar");
  CHECK(explicitly_allowed(fill, {"aten::fill_"}));
  CHECK(explicitly_allowed(fill, {"aten::fill_.Scalar"}));
  CHECK_FALSE(explicitly_allowed(fill, {"aten::fill_.Tensor"}));
  CHECK_FALSE(explicitly_allowed(fill, {"aten::fill"}));
  CHECK_FALSE(explicitly_allowed(fill, {"aten::fill_.Scala"}));
}
