// Run bounds (runtime/model/meta_check.h): archives of at most 1 MB that try to make a run allocate
// gigabytes or spin are refused at load, or bounded while running; honest ones run. The
// wall-time and RSS figures of `export-cli verify` on the same archives are measured by
// tests/cli/test_hostile.py. Dynamic shapes over the bounds at their range maximum but not at
// their minimum load and are bounded per call (runtime/model/call_bounds.h).
#include <ATen/ATen.h>

#include <atomic>
#include <thread>

#include "model/call_bounds.h"
#include "catch_compat.h"
#include "model/model_impl.h"
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

namespace {

/// x[batch, 1024] -> x * x, batch in [lo, hi]: 8 KiB of tensors per batch row at the peak
/// (x and the product), so over the 32 MiB default bound (Model::from_program: an archive of
/// 0 bytes) from batch 4097 on.
std::shared_ptr<Program> square_program(int64_t lo, int64_t hi) {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  auto rows = [](std::string name) {
    Value v = tensor_value(std::move(name), at::kFloat, {2, 1024});
    SymExpr batch;
    batch.op = SymOp::Symbol;
    batch.symbol = 0;
    v.meta->sizes[0].expr = batch;
    return v;
  };
  ValueId x = g.input(plain(0), rows("x"));
  ValueId y = g.node("aten::mul", "Tensor", {tensor_arg(x), tensor_arg(x)}, {rows("y")})[0];
  g.output(plain_out(0), y);
  std::shared_ptr<Program> p = pb.program();
  p->symbols = {{"batch", 2}};
  p->range_constraints = {{0, lo, hi}};
  return p;
}

const CallBounds* call_bounds_of(const Model& m) { return model_state(m).call_bounds.get(); }

}  // namespace

TEST_CASE("run bounds: a dynamic archive within them at its range maximum is not checked per call",
          "[hostile][bounds][dynamic]") {
  Model m = Model::from_program(square_program(1, 64), {});
  CHECK(call_bounds_of(m) == nullptr);  // the zero-cost path: nothing per call
  const at::Tensor x = at::randn({64, 1024});
  CHECK(at::equal(m.forward({x})[0], x * x));
}

TEST_CASE("run bounds: a dynamic archive over them at its maximum is bounded per call",
          "[hostile][bounds][dynamic]") {
  Model m = Model::from_program(square_program(1, 8192), {});  // loads: 8 KiB at batch 1
  REQUIRE(call_bounds_of(m) != nullptr);

  SECTION("a small call runs and matches") {
    const at::Tensor x = at::randn({3, 1024});
    CHECK(at::equal(m.forward({x})[0], x * x));
    const at::Tensor full = at::randn({4096, 1024});  // 32 MiB at the peak: at the bound
    CHECK(at::equal(m.forward({full})[0], full * full));
  }
  SECTION("a large call throws InputError naming the sizes and the flags, before running") {
    const at::Tensor x = at::randn({5000, 1024});  // 20 MB; its product would be 20 MB more
    AddressSpaceLimit limit(uint64_t{16} << 20);
    try {
      m.forward({x});
      FAIL("ran");
    } catch (const InputError& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Contains("a call with batch=5000 is over the run bounds (checked at "
                                "batch=5120"));
      CHECK_THAT(what, Contains("graph 'inference' needs 41943040 bytes of tensors at its peak, "
                                "more than the bound of 33554432"));
      CHECK_THAT(what, Contains("LoadOptions::run.max_bytes, export-cli --max-run-bytes"));
      CHECK_THAT(what, Contains("export-cli --trusted"));
    }
  }
  SECTION("the cell cache gives one verdict per cell") {
    CHECK(call_bounds_of(m)->cells() == 0);
    for (int64_t b : {4097, 4500, 5120}) {  // one cell: 5120
      CHECK_THROWS_WITH(m.forward({at::zeros({b, 1024})}),
                        Contains("batch=" + std::to_string(b) + " is over the run bounds"));
    }
    CHECK(call_bounds_of(m)->cells() == 1);
    for (int64_t b : {9, 10}) CHECK(m.forward({at::ones({b, 1024})})[0].size(0) == b);
    CHECK(call_bounds_of(m)->cells() == 2);  // 9 and 10 share the cell 10
  }
  SECTION("concurrent calls share the cache and agree") {
    std::atomic<int> ran{0}, refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int64_t b : {int64_t{33} + t, int64_t{4097} + t, int64_t{40}}) {
          try {
            ran += m.forward({at::ones({b, 1024})})[0].size(0) == b;
          } catch (const InputError&) {
            ++refused;
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    CHECK(ran == 8);      // 33..36 (cell 40) and 40
    CHECK(refused == 4);  // 4097..4100 (cell 5120)
    CHECK(call_bounds_of(m)->cells() == 2);
  }
}

TEST_CASE("run bounds: raising LoadOptions::run lets a large dynamic call run",
          "[hostile][bounds][dynamic]") {
  LoadOptions raised;
  raised.run.max_bytes = uint64_t{128} << 20;
  Model m = Model::from_program(square_program(1, 8192), {}, c10::kCPU, raised);
  const at::Tensor x = at::randn({5000, 1024});
  CHECK(at::equal(m.forward({x})[0], x * x));
}

TEST_CASE("run bounds: a dynamic archive over them even at its range minimum is refused",
          "[hostile][bounds][dynamic]") {
  CHECK_THROWS_AS(Model::from_program(square_program(4500, 8192), {}), FormatError);
  CHECK_THROWS_WITH(Model::from_program(square_program(4500, 8192), {}),
                    Contains("even at the smallest sizes (batch=4500): graph 'inference' needs "
                             "36864000 bytes of tensors at its peak, more than the bound of "
                             "33554432 (LoadOptions::run.max_bytes, export-cli --max-run-bytes"));
}
