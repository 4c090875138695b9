// Weight-derived values hoisted out of the per-call path and cached until a weight changes
// (runtime/plan/weight_cache.h), on the fixture exported with optimize_inference=True (BatchNorm
// folded into the convolutions: the folded weights are computed in the graph from the current
// weights). The folded model must track its weights exactly like the unfolded one.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include "catch_compat.h"
#include <torch/optim/sgd.h>

#include "assert_close.h"
#include "fixtures.h"
#include "model/model_impl.h"
#include "pt2rt/errors.h"
#include "pt2rt/model.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

std::string folded_path(const std::string& model) { return fixtures_dir() + "/" + model + "_fold.pt2"; }

/// The cnn_bn fixture's example inputs, with the intra-op threads its references used.
std::vector<at::Tensor> cnn_bn_inputs() {
  use_reference_threads("cnn_bn");
  return to_tensors(load_record("cnn_bn_ref.pt").at("inputs"));
}

size_t count_ops(const std::vector<Instruction>& ins, const std::string& name) {
  return std::count_if(ins.begin(), ins.end(), [&](const Instruction& i) {
    return i.op && i.op->schema().name() == name;
  });
}

/// Loads the folded and the unfolded archive of `model` and checks that both give the eval
/// outputs of the (same) current weights, within assert_close's float32 tolerances.
void check_same(Model& folded, Model& plain, const std::vector<at::Tensor>& x, const char* what) {
  INFO(what);
  at::Tensor a = folded.forward(x)[0], b = plain.forward(x)[0];
  Closeness c = assert_close(a, b);
  CHECK(c.message == "");
}

/// Copies `src`'s parameters and buffers into `dst` (same program weights order).
void copy_weights(const Model& src, Model& dst) {
  c10::NoGradGuard g;
  auto sp = src.parameters(), dp = dst.parameters();
  for (size_t i = 0; i < sp.size(); ++i) dp[i].copy_(sp[i]);
  auto sb = src.named_buffers(), db = dst.named_buffers();
  for (size_t i = 0; i < sb.size(); ++i) db[i].second.copy_(sb[i].second);
}

}  // namespace

TEST_CASE("folded BatchNorm: weight-only work is hoisted and follows weight changes",
          "[weight_cache]") {
  use_reference_threads("cnn_bn");
  Record ref = load_record("cnn_bn_ref.pt");
  std::vector<at::Tensor> x = to_tensors(ref.at("inputs"));
  LoadOptions serve;  // computed weight-only values are cached in loads that never train
  serve.inference_only = true;
  Model folded = Model::load(folded_path("cnn_bn"), c10::kCPU, serve);
  Model plain = Model::load(archive_path("cnn_bn", "default"));

  const ExecutionPlan& plan = *model_state(folded).inference->plan;
  CHECK(count_ops(plan.prologue(), "aten::rsqrt") == 2);        // one per folded BatchNorm
  CHECK(count_ops(plan.instructions(), "aten::native_batch_norm") == 0);
  CHECK(count_ops(plan.instructions(), "aten::rsqrt") == 0);    // not per call
  size_t packs = 0;  // convolutions whose weight conv_prepack.h packs in the prologue
  for (const Instruction& ins : plan.prologue()) packs += ins.packs;
  CHECK(count_ops(plan.instructions(), "aten::convolution") + packs == 2);

  CHECK(assert_close(folded.forward(x)[0], to_tensors(ref.at("eval_outputs"))[0]).message == "");
  check_same(folded, plain, x, "as loaded");
  check_same(folded, plain, x, "second call (cached)");

  SECTION("in-place change of a BatchNorm weight and a running stat") {
    for (Model* m : {&folded, &plain}) {
      c10::NoGradGuard g;
      m->named_parameters()[2].second.mul_(2);   // features.1.weight (BatchNorm gamma)
      m->named_buffers()[1].second.add_(0.5);    // features.1.running_var
    }
    check_same(folded, plain, x, "after in-place changes");
  }
  SECTION("SGD steps in training mode on the unfolded model, copied into the folded one") {
    plain.train();
    torch::optim::SGD opt(plain.parameters(), torch::optim::SGDOptions(0.1));
    for (int step = 0; step < 3; ++step) {
      opt.zero_grad();
      plain.forward(x)[0].pow(2).mean().backward();
      opt.step();
    }
    plain.eval();
    copy_weights(plain, folded);
    check_same(folded, plain, x, "after 3 SGD steps");
  }
  SECTION("a weight tensor replaced by another storage (Tensor::set_)") {
    for (Model* m : {&folded, &plain}) {
      c10::NoGradGuard g;
      at::Tensor w = m->named_parameters()[0].second;  // features.0.weight (conv)
      w.set_(w.clone().mul_(-1));
    }
    check_same(folded, plain, x, "after set_");
  }
}

TEST_CASE("a folded model that trains (default load): values computed from weights are not cached, torch::optim steps are seen",
          "[weight_cache]") {
  std::vector<at::Tensor> x = cnn_bn_inputs();
  Model folded = Model::load(folded_path("cnn_bn"));
  Model plain = Model::load(archive_path("cnn_bn", "default"));
  const ExecutionPlan& plan = *model_state(folded).inference->plan;
  CHECK(count_ops(plan.prologue(), "aten::rsqrt") == 0);
  CHECK(count_ops(plan.instructions(), "aten::rsqrt") == 2);  // the fold, per call
  for (const Instruction& ins : plan.prologue()) CHECK(!ins.packs);
  check_same(folded, plain, x, "as loaded");

  // torch::optim updates parameters through Tensor::data(): no version bump shows it. A
  // training forward does bump the running statistics (which the fold reads), so an eval call
  // between backward() and step() — a validation loss before stepping — would cache the
  // folded weights of the parameters step() is about to change.
  torch::optim::SGD opt(folded.parameters(), torch::optim::SGDOptions(0.1));
  for (int step = 0; step < 3; ++step) {
    folded.train();
    opt.zero_grad();
    folded.forward(x)[0].pow(2).mean().backward();
    folded.eval();
    folded.forward(x);
    opt.step();
  }
  copy_weights(folded, plain);
  check_same(folded, plain, x, "after 3 SGD steps on the folded model");
}

TEST_CASE("weights that are inference tensors are never cached, results stay right",
          "[weight_cache]") {
  use_reference_threads("cnn_bn");
  Record ref = load_record("cnn_bn_ref.pt");
  std::vector<at::Tensor> x = to_tensors(ref.at("inputs"));
  c10::InferenceMode guard;
  Model folded = Model::load(folded_path("cnn_bn"));
  REQUIRE(folded.parameters()[0].is_inference());
  CHECK(assert_close(folded.forward(x)[0], to_tensors(ref.at("eval_outputs"))[0]).message == "");
  folded.named_parameters()[2].second.mul_(2);  // in place, no version bump (inference tensor)
  Model plain = Model::load(archive_path("cnn_bn", "default"));
  plain.named_parameters()[2].second.mul_(2);
  check_same(folded, plain, x, "inference-tensor weights changed in place");
}

TEST_CASE("an inference_only load packs oneDNN convolution weights once: the default load's bits, weight changes followed",
          "[weight_cache][conv_prepack]") {
  std::vector<at::Tensor> x = cnn_bn_inputs();
  LoadOptions serve;
  serve.inference_only = true;
  for (const std::string& path : {archive_path("cnn_bn", "default"), folded_path("cnn_bn")}) {
    INFO(path);
    Model packed = Model::load(path, c10::kCPU, serve);
    Model plain = Model::load(path);
    const ExecutionPlan& plan = *model_state(packed).inference->plan;
    // Which convolutions are packed is ATen's choice at the fixture's sizes; the packed ones
    // leave the per-call list, their packing is in the cached prologue.
    const size_t convs = count_ops(plan.instructions(), "aten::convolution");
    size_t natives = 0, packs = 0;
    for (const Instruction& ins : plan.instructions()) natives += ins.native != nullptr;
    for (const Instruction& ins : plan.prologue()) packs += ins.packs;
    CHECK(convs + packs == 2);
    CHECK(natives >= packs);
    CHECK(packed.forward(x)[0].equal(plain.forward(x)[0]));
    CHECK(packed.forward(x)[0].equal(plain.forward(x)[0]));  // from the cache
    for (Model* m : {&packed, &plain}) {
      c10::NoGradGuard g;
      m->named_parameters()[0].second.mul_(-0.5);  // features.0.weight (conv), in place
    }
    CHECK(packed.forward(x)[0].equal(plain.forward(x)[0]));
  }
}

TEST_CASE("LoadOptions::onednn_benchmark: each convolution and linear layer on the faster kernel, close to the default load; only with inference_only",
          "[weight_cache][conv_prepack][linear_prepack][onednn_benchmark]") {
  std::vector<at::Tensor> x = cnn_bn_inputs();
  LoadOptions tuned;
  tuned.onednn_benchmark = true;
  CHECK_THROWS_AS(Model::load(folded_path("cnn_bn"), c10::kCPU, tuned), InputError);
  tuned.inference_only = true;
  for (const std::string& path : {archive_path("cnn_bn", "default"), folded_path("cnn_bn")}) {
    INFO(path);
    Model fast = Model::load(path, c10::kCPU, tuned);
    Model plain = Model::load(path);
    const at::Tensor want = plain.forward(x)[0], got = fast.forward(x)[0];
    const Closeness close = assert_close(got, want);
    INFO(close.message);
    CHECK(close.ok);
    CHECK(fast.forward(x)[0].equal(got));  // packed weights from the cache
    for (Model* m : {&fast, &plain}) {
      c10::NoGradGuard g;
      m->named_parameters()[0].second.mul_(-0.5);  // features.0.weight (conv), in place
    }
    CHECK(assert_close(fast.forward(x)[0], plain.forward(x)[0]).ok);
  }
}
