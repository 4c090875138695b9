// The training backward as a chain of autograd nodes (runtime/exec/backward_chain.h) and its
// specialisation per set of needed gradients (runtime/exec/training_plans.h), on exported
// fixtures: gradients reach .grad as they are computed (no second full set alive), autograd
// semantics kept (accumulation across calls, hooks, torch::autograd::grad, retain_graph,
// undefined .grad), parameters frozen after load cost no backward work.
#include <ATen/ATen.h>
#include "catch_compat.h"
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <set>

#include "assert_close.h"
#include "counting_allocator.h"
#include "fixtures.h"
#include "model/model_impl.h"
#include "pt2rt/model.h"

using namespace pt2rt;
using namespace pt2rt::test;

namespace {

struct Fixture {
  Record ref;
  std::vector<at::Tensor> inputs, grad_outputs;
  NamedTensors ref_grads;
  explicit Fixture(const std::string& name) {
    use_reference_threads(name);
    ref = load_record(name + "_ref.pt");
    inputs = to_tensors(ref.at("inputs"));
    grad_outputs = to_tensors(ref.at("grad_outputs"));
    ref_grads = to_named(ref.at("grads"));
  }
  at::Tensor loss(const std::vector<at::Tensor>& outs) const {
    return reference_loss(outs, grad_outputs);
  }
  const at::Tensor& ref_grad(const std::string& fqn) const {
    for (const auto& [name, g] : ref_grads) {
      if (name == fqn) return g;
    }
    throw std::runtime_error("no reference gradient for " + fqn);
  }
};

void check_grads(const Model& m, const Fixture& f, double scale, const char* what) {
  for (const auto& [fqn, p] : m.named_parameters()) {
    INFO(what << ": grad of " << fqn);
    REQUIRE(p.grad().defined());
    Closeness c = assert_close(p.grad(), f.ref_grad(fqn) * scale);
    CHECK(c.message == "");
  }
}

size_t count_ops(const ExecutionPlan& plan, const std::string& name) {
  return std::count_if(plan.instructions().begin(), plan.instructions().end(),
                       [&](const Instruction& ins) {
                         return ins.op && ins.op->schema().name() == name;
                       });
}

size_t count_deliveries(const ExecutionPlan& plan) {
  size_t n = 0;
  for (const Segment& s : plan.segments()) n += s.deliveries.size();
  return n;
}

}  // namespace

TEST_CASE("each gradient reaches .grad as it is computed: no second full set is alive",
          "[backward][memory]") {
  Fixture f("resnet18");
  Model m = Model::load(archive_path("resnet18", "default"));
  m.train();
  f.loss(m.forward(f.inputs)).backward();  // every .grad exists from now on
  int64_t grad_bytes = 0;
  for (const at::Tensor& p : m.parameters()) {
    p.grad().zero_();  // zero_grad(set_to_none=false)
    grad_bytes += p.numel() * static_cast<int64_t>(p.element_size());
  }

  // Bytes live (allocated since install) whenever a gradient reaches its parameter (the
  // parameter's tensor hook runs just before AccumulateGrad adds it into .grad).
  bench::CountingAllocator& counter = bench::CountingAllocator::install();
  int64_t max_live_at_delivery = 0;
  size_t deliveries = 0;
  for (const at::Tensor& p : m.parameters()) {
    const_cast<at::Tensor&>(p).register_hook([&](const at::Tensor& g) {
      max_live_at_delivery = std::max(max_live_at_delivery, counter.live_bytes());
      ++deliveries;
      return g;
    });
  }
  at::Tensor loss = f.loss(m.forward(f.inputs));
  const int64_t peak = bench::peak_above_start(counter, [&] { loss.backward(); });
  bench::CountingAllocator::uninstall();

  INFO("max live at a delivery " << max_live_at_delivery << " bytes, backward peak " << peak
       << " bytes; parameter gradients " << grad_bytes << " bytes");
  CHECK(deliveries == m.parameters().size());
  // All gradients delivered at the end of one backward node would mean >= grad_bytes live at
  // the deliveries; delivered as produced, at most one layer's (resnet18's largest: the
  // layer4 3x3 convs, 9.4 MB of 44.7) is alive besides the activations.
  CHECK(max_live_at_delivery < grad_bytes / 2);
  check_grads(m, f, 1.0, "accumulated into zeroed .grad");
  // The backward ran as several autograd nodes (segments), not one.
  const ModelState& s = model_state(m);
  REQUIRE(s.training_plans.size() == 1);
  std::vector<bool> all(s.parameter_weights.size() + f.inputs.size(), false);
  std::fill(all.begin(), all.begin() + static_cast<long>(s.parameter_weights.size()), true);
  CHECK(s.training_plans.get(s, all).segment_grads.size() > 10);
}

TEST_CASE("autograd semantics: accumulation, hooks, autograd::grad, retain_graph",
          "[backward][autograd]") {
  Fixture f("cnn_bn");
  SECTION("undefined .grad is set, a second backward accumulates") {
    Model m = Model::load(archive_path("cnn_bn", "default"));
    m.train();
    f.loss(m.forward(f.inputs)).backward();
    check_grads(m, f, 1.0, "first backward");
    f.loss(m.forward(f.inputs)).backward();
    // The second forward sees updated BatchNorm running stats but, in training mode, uses
    // batch statistics: the same gradients again.
    check_grads(m, f, 2.0, "second backward");
  }
  SECTION("retain_graph: backward twice through one graph") {
    Model m = Model::load(archive_path("cnn_bn", "min_cut"));
    m.train();
    at::Tensor loss = f.loss(m.forward(f.inputs));
    loss.backward({}, /*retain_graph=*/true);
    loss.backward();
    check_grads(m, f, 2.0, "retain_graph");
  }
  SECTION("tensor hooks on parameters run, and can change the gradient") {
    Model m = Model::load(archive_path("cnn_bn", "default"));
    m.train();
    std::vector<at::Tensor> params = m.parameters();
    std::set<size_t> seen;
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].register_hook([&seen, i](const at::Tensor& g) {
        seen.insert(i);
        return i == 0 ? g * 3 : g;
      });
    }
    f.loss(m.forward(f.inputs)).backward();
    CHECK(seen.size() == params.size());
    const auto named = m.named_parameters();
    CHECK(assert_close(named[0].second.grad(), f.ref_grad(named[0].first) * 3).message == "");
    CHECK(assert_close(named[1].second.grad(), f.ref_grad(named[1].first)).message == "");
  }
  SECTION("torch::autograd::grad returns gradients without touching .grad") {
    Model m = Model::load(archive_path("cnn_bn", "default"));
    m.train();
    const auto named = m.named_parameters();
    at::Tensor loss = f.loss(m.forward(f.inputs));
    auto grads = torch::autograd::grad({loss}, {named.front().second, named.back().second});
    REQUIRE(grads.size() == 2);
    CHECK(assert_close(grads[0], f.ref_grad(named.front().first)).message == "");
    CHECK(assert_close(grads[1], f.ref_grad(named.back().first)).message == "");
    for (const auto& [fqn, p] : named) {
      INFO(fqn);
      CHECK_FALSE(p.grad().defined());
    }
  }
}

TEST_CASE("parameters frozen after load cost no backward work", "[backward][pruning]") {
  Fixture f("resnet18");
  Model m = Model::load(archive_path("resnet18", "default"));
  m.train();
  const ModelState& s = model_state(m);
  const size_t full_nodes = s.backward->plan->instructions().size();
  for (const auto& [fqn, p] : m.named_parameters()) {
    if (fqn.rfind("fc.", 0) != 0) const_cast<at::Tensor&>(p).requires_grad_(false);
  }
  f.loss(m.forward(f.inputs)).backward();
  for (const auto& [fqn, p] : m.named_parameters()) {
    INFO(fqn);
    if (fqn.rfind("fc.", 0) == 0) {
      CHECK(assert_close(p.grad(), f.ref_grad(fqn)).message == "");
    } else {
      CHECK_FALSE(p.grad().defined());
    }
  }
  std::vector<bool> needs(s.parameter_weights.size() + f.inputs.size(), false);
  const auto named = m.named_parameters();
  for (size_t i = 0; i < named.size(); ++i) needs[i] = named[i].first.rfind("fc.", 0) == 0;
  REQUIRE(s.training_plans.size() == 1);
  const TrainingPlan& fc_only = s.training_plans.get(s, needs);
  REQUIRE(fc_only.backward);
  INFO("backward nodes: " << fc_only.backward->instructions().size() << " of " << full_nodes);
  CHECK(fc_only.backward->instructions().size() * 10 < full_nodes);
  CHECK(count_ops(*fc_only.backward, "aten::convolution_backward") == 0);
  CHECK(count_ops(*s.backward->plan, "aten::convolution_backward") > 0);
  // The forward keeps only what that backward reads.
  CHECK(count_deliveries(*fc_only.forward) < count_deliveries(*s.forward->plan));

  SECTION("unfrozen again: a second specialisation, every gradient") {
    for (const at::Tensor& p : m.parameters()) {
      const_cast<at::Tensor&>(p).requires_grad_(true);
      const_cast<at::Tensor&>(p).mutable_grad() = at::Tensor();
    }
    f.loss(m.forward(f.inputs)).backward();
    CHECK(s.training_plans.size() == 2);
    check_grads(m, f, 1.0, "all trainable again");
  }
  SECTION("everything frozen: no autograd node, buffers still updated") {
    for (const at::Tensor& p : m.parameters()) const_cast<at::Tensor&>(p).requires_grad_(false);
    const auto buffers = m.named_buffers();
    const auto it = std::find_if(buffers.begin(), buffers.end(), [](const auto& b) {
      return b.first == "bn1.num_batches_tracked";
    });
    REQUIRE(it != buffers.end());
    const int64_t before = it->second.item<int64_t>();
    std::vector<at::Tensor> out = m.forward(f.inputs);
    CHECK_FALSE(out[0].requires_grad());
    CHECK(it->second.item<int64_t>() == before + 1);
  }
}
