// The device-independent bookkeeping of LoadOptions::cuda_graphs (runtime/exec/
// inference_graphs.h, training_graphs.h), on the CPU with a stand-in GraphCapturer whose
// "graph" re-runs the recorded call on its static inputs and writes the results into its
// static outputs — what a CUDA graph replay does, including overwriting the outputs of the
// previous replay. Checked: warm-ups, then one capture and replays per key; a forward's
// backward replayed over the forward's static saved values; the rule that keeps a pending
// backward's saved values from being overwritten; the refusal of a stale backward; refused
// captures; the key cap; inference results that outlive the next replay.
#include "catch_compat.h"

#include <ATen/ATen.h>

#include "exec/inference_graphs.h"
#include "exec/training_graphs.h"
#include "pt2rt/errors.h"

namespace pt2rt {
using test::Contains;
namespace {

class StandInCall final : public CapturedCall {
 public:
  StandInCall(GraphCapturer::Run run, std::vector<at::Tensor> inputs)
      : run_(std::move(run)), inputs_(std::move(inputs)), outputs_(run_(inputs_)) {}
  const std::vector<at::Tensor>& replay(const std::vector<at::Tensor>& inputs) override {
    for (size_t i = 0; i < inputs.size(); ++i) inputs_[i].copy_(inputs[i]);
    const std::vector<at::Tensor> fresh = run_(inputs_);
    for (size_t i = 0; i < fresh.size(); ++i) outputs_[i].copy_(fresh[i]);
    return outputs_;
  }

 private:
  GraphCapturer::Run run_;
  std::vector<at::Tensor> inputs_, outputs_;
};

class StandInCapturer final : public GraphCapturer {
 public:
  int warm_ups = 0, captures = 0;
  bool refuse = false;
  std::vector<at::Tensor> warm_up(const std::vector<at::Tensor>& inputs,
                                  const Run& run) override {
    ++warm_ups;
    return run(inputs);
  }
  std::unique_ptr<CapturedCall> capture(const std::vector<at::Tensor>& inputs, const Run& run,
                                        const CapturedCall*, std::string* error) override {
    if (refuse) {
      *error = "stand-in refusal";
      return nullptr;
    }
    ++captures;
    std::vector<at::Tensor> statics;
    for (const at::Tensor& t : inputs) statics.push_back(t.clone());
    return std::make_unique<StandInCall>(run, std::move(statics));
  }
};

/// The "model": forward y = 3x, saving x²; backward of y with grad g: g · saved (any rule
/// that reads the saved value).
std::vector<at::Tensor> fw(const std::vector<at::Tensor>& in) {
  return {in[0] * 3, in[0] * in[0]};
}

struct Step {
  TrainingGraphs::Result forward;
  std::shared_ptr<TrainingGraphs::Ticket> ticket;
};

Step forward(TrainingGraphs& g, const at::Tensor& x) {
  Step s;
  s.forward = g.forward(&g, {x}, fw, &s.ticket);
  return s;
}

at::Tensor backward(TrainingGraphs& g, const Step& s, const at::Tensor& grad,
                    bool* replayed = nullptr) {
  const at::Tensor saved = s.forward.outputs[1];
  TrainingGraphs::Result r = g.backward(
      s.ticket, {grad}, [saved](const std::vector<at::Tensor>& in) {
        return std::vector<at::Tensor>{in[0] * saved};
      });
  if (replayed) *replayed = r.replayed;
  return r.outputs[0].clone();
}

}  // namespace

TEST_CASE("training_graphs: warm-ups, one capture, replays of forward and backward",
          "[cuda_graphs]") {
  auto capturer = std::make_shared<StandInCapturer>();
  TrainingGraphs g(capturer, 4);
  for (int call = 0; call < kCudaGraphWarmupRuns + 4; ++call) {
    INFO("call " << call);
    const at::Tensor x = at::full({3}, 1.0 + call), grad = at::full({3}, 2.0);
    Step s = forward(g, x);
    const bool graphed = call >= kCudaGraphWarmupRuns;
    CHECK(s.forward.replayed == graphed);
    REQUIRE(s.ticket);  // warm-ups too: their backward warms up as well
    CHECK(at::equal(s.forward.outputs[0], x * 3));
    bool replayed = false;
    CHECK(at::equal(backward(g, s, grad, &replayed), grad * x * x));
    CHECK(replayed == graphed);
  }
  CHECK(capturer->warm_ups == 2 * kCudaGraphWarmupRuns);  // forwards and their backwards
  CHECK(capturer->captures == 2);                         // one forward, one backward graph
  const std::vector<std::string> report = g.report();
  REQUIRE(report.size() == 1);
  CHECK_THAT(report[0], Contains("forward captured, 4 replays"));
  CHECK_THAT(report[0], Contains("captured, 4 replays"));
}

TEST_CASE("training_graphs: a pending backward keeps its saved values; a stale one throws",
          "[cuda_graphs]") {
  TrainingGraphs g(std::make_shared<StandInCapturer>(), 4);
  const at::Tensor grad = at::ones({2});
  for (int i = 0; i < kCudaGraphWarmupRuns; ++i) {
    Step s = forward(g, at::ones({2}));
    backward(g, s, grad);
  }
  // Two forwards before their backwards (gradient accumulation): the second runs without
  // the graph, so the first's saved values survive.
  const at::Tensor a = at::full({2}, 2.0), b = at::full({2}, 5.0);
  Step sa = forward(g, a);
  Step sb = forward(g, b);
  CHECK(sa.forward.replayed);
  CHECK_FALSE(sb.forward.replayed);
  CHECK_FALSE(sb.ticket);
  CHECK(at::equal(backward(g, sb, grad), a.new_full({2}, 25.0)));
  CHECK(at::equal(backward(g, sa, grad), a.new_full({2}, 4.0)));
  // The backward ran: the next forward replays again.
  Step sc = forward(g, b);
  CHECK(sc.forward.replayed);
  // A forward whose autograd graph is dropped without a backward ends the wait.
  sc.ticket.reset();
  Step sd = forward(g, a);
  CHECK(sd.forward.replayed);
  // retain_graph: a second backward of the same replay is fine ...
  CHECK(at::equal(backward(g, sd, grad), a.new_full({2}, 4.0)));
  CHECK(at::equal(backward(g, sd, grad), a.new_full({2}, 4.0)));
  // ... until a later replay overwrote its saved values: refused, not computed from them.
  Step se = forward(g, b);
  CHECK(se.forward.replayed);
  CHECK_THROWS_AS(backward(g, sd, grad), ExecutionError);
  CHECK(at::equal(backward(g, se, grad), a.new_full({2}, 25.0)));
}

TEST_CASE("training_graphs: refused captures and keys past the cap run without a graph",
          "[cuda_graphs]") {
  auto capturer = std::make_shared<StandInCapturer>();
  capturer->refuse = true;
  TrainingGraphs g(capturer, 1);
  const at::Tensor grad = at::ones({2});
  for (int call = 0; call < kCudaGraphWarmupRuns + 2; ++call) {
    Step s = forward(g, at::full({2}, 3.0));
    CHECK_FALSE(s.forward.replayed);
    CHECK(at::equal(backward(g, s, grad), at::full({2}, 9.0)));
  }
  REQUIRE(g.report().size() == 1);
  CHECK_THAT(g.report()[0], Contains("refused: stand-in refusal"));
  Step other = forward(g, at::full({4}, 3.0));  // a second key: over the cap of 1
  CHECK_FALSE(other.forward.replayed);
  CHECK_FALSE(other.ticket);
  CHECK(g.report().size() == 1);
}

TEST_CASE("inference_graphs: results are the caller's, not the graph's static outputs",
          "[cuda_graphs]") {
  auto capturer = std::make_shared<StandInCapturer>();
  InferenceGraphs g(capturer, 2);
  std::vector<at::Tensor> kept;
  for (int call = 0; call < kCudaGraphWarmupRuns + 3; ++call) {
    kept.push_back(g.call({at::full({2}, 1.0 + call)}, fw).at(0));
  }
  for (size_t call = 0; call < kept.size(); ++call) {
    CHECK(at::equal(kept[call], at::full({2}, 3.0 * (1.0 + call))));
  }
  CHECK(capturer->captures == 1);
  REQUIRE(g.report().size() == 1);
  CHECK_THAT(g.report()[0], Contains("captured, 3 replays"));
}

}  // namespace pt2rt
