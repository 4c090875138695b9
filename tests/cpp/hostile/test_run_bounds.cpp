// Run bounds (runtime/meta_check.h): archives of at most 1 MB that try to make a run allocate
// gigabytes or spin are refused at load, or bounded while running; honest ones run. The
// wall-time and RSS figures of `export-cli verify` on the same archives are measured by
// tests/cli/test_hostile.py.
#include <ATen/ATen.h>

#include "catch_compat.h"
#include "program_builder.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"
#include "reproducers.h"
#include "resource_guard.h"

using namespace pt2rt;
using namespace pt2rt::test;
using pt2rt::test::Contains;

TEST_CASE("run bounds: adversarial archives of at most 1 MB are refused or bounded",
          "[hostile][bounds]") {
  // Refused at load, by the bound named; "either" = refused at load (a Meta kernel computed the
  // real size) or stopped while running by the allocation cap (no Meta kernel in this LibTorch).
  const std::map<std::string, std::string> expected = {
      {"zeros_1GiB", "bytes of tensors at its peak"},
      {"expand_clone_1GiB", "bytes of tensors at its peak"},
      {"repeat_1GiB", "bytes of tensors at its peak"},
      {"mm_chain", "element operations per run"},
      {"einsum_1024", "element operations per run"},
      {"conv_big_kernel", "more than the bound"},  // work, and im2col scratch (bytes)
      {"max_pool_big_window", "element operations per run"},
      {"index_blowup", "either"},
      {"many_small_nodes", "runs"},
      {"many_compact_nodes", "runs"},
      {"elementwise_at_bound", "runs"},
  };
  const auto archives = run_bound_archives();
  REQUIRE(archives.size() == expected.size());
  AddressSpaceLimit limit(uint64_t{512} << 20);  // nothing may allocate a gigabyte
  for (const auto& [name, bytes] : archives) {
    INFO(name << " (" << bytes.size() << " bytes)");
    CHECK(bytes.size() <= (uint64_t{1} << 20));
    const std::string& want = expected.at(name);
    if (want == "runs") {
      Model m = Model::load(bytes.data(), bytes.size());
      CHECK(m.forward({at::ones({1})}).size() == 1);
    } else if (want == "either") {
      try {
        Model m = Model::load(bytes.data(), bytes.size());
        m.forward({at::ones({1})});
        FAIL("ran");
      } catch (const FormatError& e) {
        CHECK_THAT(std::string(e.what()), Contains("the archive declares"));
      } catch (const ExecutionError& e) {
        CHECK_THAT(std::string(e.what()), Contains("may allocate at most"));
      }
    } else {
      CHECK_THROWS_AS(Model::load(bytes.data(), bytes.size()), FormatError);
      CHECK_THROWS_WITH(Model::load(bytes.data(), bytes.size()), Contains(want));
    }
  }
}

TEST_CASE("run bounds: LoadOptions raises them for a trusted archive", "[hostile][bounds]") {
  for (const auto& [name, bytes] : run_bound_archives()) {
    if (name != "mm_chain") continue;
    LoadOptions trusted;
    trusted.run.max_work = RunLimits::kUnlimited;
    CHECK_NOTHROW(Model::load(bytes.data(), bytes.size(), c10::kCPU, trusted));
    LoadOptions tight;
    tight.run.max_work = 1000;
    CHECK_THROWS_WITH(Model::load(bytes.data(), bytes.size(), c10::kCPU, tight),
                      Contains("more than the bound of 1000"));
  }
}

TEST_CASE("run bounds: declared metas that the kernels contradict are refused at load",
          "[hostile][bounds]") {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  ValueId x = g.input(plain(0), tensor_value("x", at::kFloat, {2, 3}));
  // mm of [2, 3] x [3, 2] is [2, 2]; the archive claims [2, 200000].
  ValueId t = g.node("aten::t", "", {tensor_arg(x)}, {tensor_value("t", at::kFloat, {3, 2})})[0];
  ValueId y = g.node("aten::mm", "", {tensor_arg(x), tensor_arg(t)},
                     {tensor_value("y", at::kFloat, {2, 200000})})[0];
  g.output(plain_out(0), y);
  CHECK_THROWS_WITH(Model::from_program(pb.program(), {}),
                    Contains("result 0 is float32[2, 2], the archive declares float32[2, 200000]"));
}

namespace {

/// x[4, 3] -> native_batch_norm(x, None, None, running_mean, running_var, training, ...).
std::shared_ptr<Program> batch_norm_program(bool training) {
  ProgramBuilder pb;
  pb.weight("running_mean", WeightKind::Buffer, at::kFloat, {3});
  pb.weight("running_var", WeightKind::Buffer, at::kFloat, {3});
  auto g = pb.graph(GraphRole::Inference);
  ValueId m = g.input(buffer("running_mean"), tensor_value("running_mean", at::kFloat, {3}));
  ValueId v = g.input(buffer("running_var"), tensor_value("running_var", at::kFloat, {3}));
  ValueId x = g.input(plain(0), tensor_value("x", at::kFloat, {4, 3}));
  auto outs = g.node("aten::native_batch_norm", "",
                     {tensor_arg(x), arg(NoneArg{}), arg(NoneArg{}), tensor_arg(m), tensor_arg(v),
                      arg(training), arg(0.1), arg(1e-5)},
                     {tensor_value("y", at::kFloat, {4, 3}),
                      tensor_value("mean", at::kFloat, {training ? 3 : 0}),
                      tensor_value("invstd", at::kFloat, {training ? 3 : 0})});
  g.output(plain_out(0), outs[0]);
  return pb.program();
}

}  // namespace

TEST_CASE("hostile: batch norm gets no running stats in training mode (a hidden mutation)",
          "[hostile][bounds][policy]") {
  // native_batch_norm overwrites running_mean/var in training mode: LibTorch 2.x says so
  // (Tensor(a!)? running_mean), 1.13 does not. Either way the node is refused at load; in
  // eval mode (training=False) the same op may take them, as exported inference graphs do.
  const std::vector<at::Tensor> weights = {at::zeros({3}), at::ones({3})};
  CHECK_THROWS_WITH(Model::from_program(batch_norm_program(true), weights),
                    Contains("gets 'running_mean' in training mode, which the kernel overwrites"));
  Model eval = Model::from_program(batch_norm_program(false), weights);
  CHECK(eval.forward({at::ones({4, 3})})[0].sizes() == c10::IntArrayRef({4, 3}));
}
