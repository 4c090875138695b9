// An inference plan's convolutions on oneDNN weights packed once (runtime/kernels/conv_prepack.h), on
// hand-built inference graphs: which convolutions are rewritten (exactly those ATen itself
// runs through oneDNN, on weights only they read), that the results are ATen's bits, that a
// changed weight is repacked, and that calls which do not fit run at::convolution; with
// OneDnnChoice::OneDnn / Benchmark (LoadOptions::onednn_benchmark) also the others, close to
// ATen's results.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include "catch_compat.h"

#include "assert_close.h"
#include "kernels/conv_prepack.h"
#include "fixtures.h"
#include "core/libtorch_compat.h"
#include "plan/op_resolution.h"
#include "plan/plan.h"
#include "program_builder.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

struct Shape {
  int64_t batch = 8, channels = 16, size = 8, out_channels = 32, kernel = 3;
  bool second_conv_on_same_weight = false;  ///< y2 = conv(y, w): the weight has two readers
};

/// y = convolution(x, w, b, stride 1, padding kernel/2, dilation 1, groups 1) on
/// x: float32[batch, channels, size, size], w: the parameter "conv.weight", b: "conv.bias".
/// Inputs in order x, w, b; `cacheable`: whether w and b are bound to model weights.
std::unique_ptr<ExecutionPlan> conv_plan(const Shape& s, bool cacheable = true,
                                         c10::Device device = c10::kCPU, bool prepack = true,
                                         OneDnnChoice choice = OneDnnChoice::Aten) {
  ProgramBuilder pb;
  auto g = pb.graph(GraphRole::Inference);
  const int64_t pad = s.kernel / 2;
  ValueId x = g.input(plain(0), tensor_value("x", at::kFloat, {s.batch, s.channels, s.size, s.size}));
  ValueId w = g.input(param("conv.weight"), tensor_value("conv.weight", at::kFloat,
                                                          {s.out_channels, s.channels, s.kernel, s.kernel}));
  ValueId b = g.input(param("conv.bias"), tensor_value("conv.bias", at::kFloat, {s.out_channels}));
  auto conv = [&](ValueId in, const char* name) {
    return g.node("aten::convolution", "",
                  {tensor_arg(in), tensor_arg(w), tensor_arg(b), arg(IntListArg{{1, 1}}),
                   arg(IntListArg{{pad, pad}}), arg(IntListArg{{1, 1}}), arg(false),
                   arg(IntListArg{{0, 0}}), arg(int64_t{1})},
                  {tensor_value(name, at::kFloat, {s.batch, s.out_channels, s.size, s.size})})[0];
  };
  ValueId y = conv(x, "y");
  g.output(plain_out(0), y);
  if (s.second_conv_on_same_weight) g.output(plain_out(1), conv(y, "y2"));
  auto prog = pb.program();
  PlanOptions options;
  if (cacheable) options.cacheable_inputs = {false, true, true};
  options.inference_only = prepack;
  options.onednn_choice = choice;
  return ExecutionPlan::build(prog, prog->graphs[0], resolve_operators(*prog), device, options);
}

struct Tensors {
  at::Tensor x, w, b;
};

Tensors make_tensors(const Shape& s) {
  at::manual_seed(3);
  return {at::randn({s.batch, s.channels, s.size, s.size}),
          at::randn({s.out_channels, s.channels, s.kernel, s.kernel}), at::randn({s.out_channels})};
}

at::Tensor run(const ExecutionPlan& plan, const Tensors& t) {
  return plan.run({t.x, t.w, t.b})[0].toTensor();
}

at::Tensor aten_conv(const Tensors& t, int64_t kernel) {
  return at::conv2d(t.x, t.w, t.b, {1, 1}, {kernel / 2, kernel / 2});
}

bool packed(const ExecutionPlan& plan) {
  const bool pack = plan.prologue().size() == 1 && plan.prologue()[0].native == &prepack_conv2d_weight_op();
  const bool conv = plan.instructions().size() == 1 && plan.instructions()[0].native == &conv2d_prepacked_op();
  CHECK(pack == conv);
  return pack && conv;
}

bool aten_picks_onednn_for(const Shape& s) {
  const at::Tensor x = at::empty({s.batch, s.channels, s.size, s.size});
  const at::Tensor w = at::empty({s.out_channels, s.channels, s.kernel, s.kernel});
  return aten_picks_onednn(x, w, {1, 1}, {s.kernel / 2, s.kernel / 2}, {1, 1}, 1);
}

}  // namespace

TEST_CASE("conv prepack: a convolution ATen runs through oneDNN gets its weight packed once, with ATen's bits",
          "[plan][conv_prepack]") {
  REQUIRE(at::hasMKLDNN());  // both lanes' LibTorch (Debian's) are built with oneDNN
  c10::NoGradGuard no_grad;
  const Shape s;  // batch 8: ATen's own choice is oneDNN
  REQUIRE(aten_picks_onednn_for(s));
  auto plan = conv_plan(s);
  REQUIRE(packed(*plan));
  CHECK(plan->prologue()[0].node == 0);  // errors and profiles name the convolution
  CHECK(plan->instructions()[0].node == 0);

  Tensors t = make_tensors(s);
  CHECK(run(*plan, t).equal(aten_conv(t, s.kernel)));
  CHECK(run(*plan, t).equal(aten_conv(t, s.kernel)));  // from the weight cache

  SECTION("a weight changed in place is packed again") {
    t.w.mul_(-0.5);
    CHECK(run(*plan, t).equal(aten_conv(t, s.kernel)));
  }
  SECTION("another weight tensor is packed again") {
    Tensors other = make_tensors(s);
    other.w = at::randn_like(t.w);
    CHECK(run(*plan, other).equal(aten_conv(other, s.kernel)));
  }
  SECTION("a channels-last input runs at::convolution on the dense weight") {
    Tensors cl{t.x.contiguous(at::MemoryFormat::ChannelsLast), t.w, t.b};
    const at::Tensor got = run(*plan, cl);
    CHECK(got.equal(aten_conv(cl, s.kernel)));
  }
  SECTION("a call at another intra-op thread count runs at::convolution on the dense weight") {
    at::Tensor got, want;
    {
      const ScopedThreads other(at::get_num_threads() == 1 ? 2 : 1);
      got = run(*plan, t);
      want = aten_conv(t, s.kernel);
    }
    CHECK(got.equal(want));
  }
}

TEST_CASE("conv prepack: what is not rewritten", "[plan][conv_prepack]") {
  c10::NoGradGuard no_grad;
  Shape s;
  SECTION("a convolution ATen runs with another algorithm (batch 1, small image) keeps it") {
    s.batch = 1;
    s.size = 4;
    auto plan = conv_plan(s);
    CHECK(packed(*plan) == aten_picks_onednn_for(s));
    const Tensors t = make_tensors(s);
    CHECK(run(*plan, t).equal(aten_conv(t, s.kernel)));
  }
  SECTION("a weight two convolutions read") {
    s.out_channels = s.channels;
    s.second_conv_on_same_weight = true;
    auto plan = conv_plan(s);
    CHECK(plan->prologue().empty());
    CHECK(plan->instructions().size() == 2);
    for (const Instruction& ins : plan->instructions()) CHECK(ins.native == nullptr);
  }
  SECTION("a plan without weight caching (the training forward)") {
    auto plan = conv_plan(s, /*cacheable=*/false);
    CHECK(plan->prologue().empty());
    REQUIRE(plan->instructions().size() == 1);
    CHECK(plan->instructions()[0].native == nullptr);
  }
  SECTION("a plan built without PlanOptions::inference_only (a load that may train)") {
    auto plan = conv_plan(s, true, c10::kCPU, /*prepack=*/false);
    REQUIRE(aten_picks_onednn_for(s));
    CHECK(plan->prologue().empty());
    REQUIRE(plan->instructions().size() == 1);
    CHECK(plan->instructions()[0].native == nullptr);
  }
  SECTION("the meta check's plan") {
    auto plan = conv_plan(s, true, c10::Device(c10::kMeta));
    for (const Instruction& ins : plan->instructions()) CHECK(ins.native == nullptr);
    for (const Instruction& ins : plan->prologue()) CHECK(ins.native == nullptr);
  }
}

TEST_CASE("conv prepack: OneDnnChoice::OneDnn and Benchmark move ATen's im2col convolutions to oneDNN, close to ATen",
          "[plan][conv_prepack][onednn_benchmark]") {
  c10::NoGradGuard no_grad;
  Shape s;
  s.batch = 1;  // batch 1 on one thread, unstrided: ATen's own choice is im2col + GEMM
  s.size = 4;
  const ScopedThreads one_thread(1);
  REQUIRE_FALSE(aten_picks_onednn_for(s));
  const Tensors t = make_tensors(s);
  const at::Tensor want = aten_conv(t, s.kernel);

  auto onednn = conv_plan(s, true, c10::kCPU, true, OneDnnChoice::OneDnn);
  CHECK(packed(*onednn));
  const Closeness close = assert_close(run(*onednn, t), want);
  CHECK(close.ok);
  INFO(close.message);
  CHECK(run(*onednn, t).equal(run(*onednn, t)));  // the packed weight from the cache

  // Benchmark: whichever was faster at plan build; either way close to ATen's result.
  auto benchmarked = conv_plan(s, true, c10::kCPU, true, OneDnnChoice::Benchmark);
  const at::Tensor got = run(*benchmarked, t);
  CHECK(assert_close(got, want).ok);
  if (!packed(*benchmarked)) CHECK(got.equal(want));

  SECTION("a plan that may train (no inference_only) ignores the choice") {
    auto plan = conv_plan(s, true, c10::kCPU, /*prepack=*/false, OneDnnChoice::OneDnn);
    CHECK(plan->prologue().empty());
    REQUIRE(plan->instructions().size() == 1);
    CHECK(plan->instructions()[0].native == nullptr);
  }
}
