// bench/per_node_overhead.cpp — what pt2rt's interpreter costs per node, next to the ops.
//
//   pt2rt_bench_overhead [--nodes N] [--iters K] [archive.pt2 ...]
//
// 1. A tiny-tensor chain built in-process (float32[4]; N nodes cycling aten::add.Tensor,
//    aten::mul.Tensor, aten::relu over a few parameters), timed four ways, per node:
//      plan        ExecutionPlan::run (frame, stack building, callBoxed, slot release)
//      bare        a loop of OperatorHandle::callBoxed over prebuilt stacks of the same ops
//                  (copying each prebuilt stack, as a call consumes it)
//      eager       the same ops through LibTorch's typed C++ API (at::add, at::mul, at::relu)
//      model       Model::forward in eval mode (input checks + binding + plan)
//      observed    ExecutionPlan::run with a no-op NodeObserver installed (pt2rt/node_observer.h:
//                  what export-cli profile's timing adds per node)
//    all under c10::InferenceMode. Reported: ns per node, plan/bare, plan/eager ratios, and
//    the observation cost per node (observed - plan).
// 2. For each archive given: the inference, forward and backward plans of its graphs on
//    its bundled example inputs (or zeros of the graph's input metadata), plan vs bare.
//
// Each variant runs K times interleaved with the others (so load on the machine hits all
// alike), after warm-up, on one thread (at::set_num_threads(1)) so kernel parallelism does
// not blur the interpreter's share; the minimum and the median per whole graph are shown.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "model/model_impl.h"
#include "plan/op_resolution.h"
#include "plan/plan.h"
#include "program_builder.h"
#include "pt2rt/model.h"
#include "pt2rt/node_observer.h"

using namespace pt2rt;
using namespace pt2rt::test;
using Clock = std::chrono::steady_clock;

namespace {

struct NoOpObserver : NodeObserver {
  void on_node(const NodeEvent&) override {}
};

struct Timing {
  double min_ns = 0, median_ns = 0;
};

/// Times every function of `fns` `iters` times, interleaved (one run of each per round, so
/// a busy machine slows all of them alike), after iters/10+1 warm-up rounds.
std::vector<Timing> measure(int iters, const std::vector<std::function<void()>>& fns) {
  for (int i = 0; i < iters / 10 + 1; ++i) {
    for (const auto& fn : fns) fn();
  }
  std::vector<std::vector<double>> t(fns.size(), std::vector<double>(iters));
  for (int i = 0; i < iters; ++i) {
    for (size_t f = 0; f < fns.size(); ++f) {
      auto t0 = Clock::now();
      fns[f]();
      t[f][i] = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    }
  }
  std::vector<Timing> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back(Timing{v.front(), v[v.size() / 2]});
  }
  return out;
}

/// Runs `plan` once like ExecutionPlan::run, recording each instruction's argument stack.
std::vector<torch::jit::Stack> record_stacks(const ExecutionPlan& plan,
                                             std::vector<c10::IValue> inputs) {
  std::vector<c10::IValue> slots(plan.num_slots());
  const Graph& g = plan.graph();
  for (size_t i = 0; i < inputs.size(); ++i) slots[g.inputs[i].value] = inputs[i];
  std::vector<torch::jit::Stack> stacks;
  for (const Instruction& ins : plan.instructions()) {
    torch::jit::Stack stack;
    ExecutionPlan::push_arguments(ins, slots, stack);
    stacks.push_back(stack);
    if (ins.native) ins.native->kernel(stack);
    else ins.op->callBoxed(stack);
    for (size_t j = 0; j < ins.outputs.size(); ++j) slots[ins.outputs[j]] = stack[j];
  }
  return stacks;
}

/// The bare loop: each instruction's op called on a copy of its prebuilt stack.
std::function<void()> bare_loop(const ExecutionPlan& plan,
                                const std::vector<torch::jit::Stack>& stacks) {
  return [&plan, &stacks] {
    const auto& ins = plan.instructions();
    for (size_t i = 0; i < ins.size(); ++i) {
      torch::jit::Stack s = stacks[i];
      if (ins[i].native) ins[i].native->kernel(s);
      else ins[i].op->callBoxed(s);
    }
  };
}

void chain_benchmark(int nodes, int iters) {
  constexpr int kParams = 4;
  ProgramBuilder pb;
  for (int p = 0; p < kParams; ++p) pb.weight("w" + std::to_string(p), WeightKind::Parameter, at::kFloat, {4});
  auto g = pb.graph(GraphRole::Inference);
  std::vector<ValueId> w;
  for (int p = 0; p < kParams; ++p) {
    w.push_back(g.input(param("w" + std::to_string(p)), tensor_value("w" + std::to_string(p), at::kFloat, {4})));
  }
  ValueId y = g.input(plain(0), tensor_value("x", at::kFloat, {4}));
  for (int i = 0; i < nodes; ++i) {
    Value out = tensor_value("v" + std::to_string(i), at::kFloat, {4});
    switch (i % 3) {
      case 0: y = g.node("aten::add", "Tensor", {tensor_arg(y), tensor_arg(w[i % kParams])}, {out})[0]; break;
      case 1: y = g.node("aten::mul", "Tensor", {tensor_arg(y), tensor_arg(w[(i + 1) % kParams])}, {out})[0]; break;
      default: y = g.node("aten::relu", "", {tensor_arg(y)}, {out})[0]; break;
    }
  }
  g.output(plain_out(0), y);
  std::vector<at::Tensor> weights;
  for (int p = 0; p < kParams; ++p) weights.push_back(at::rand({4}) * 0.5 + 0.75);
  Model model = Model::from_program(pb.program(), weights);
  const ModelState& state = model_state(model);
  const ExecutionPlan& plan = *state.inference->plan;
  at::Tensor x = at::rand({4});

  c10::InferenceMode guard;
  std::vector<c10::IValue> in;
  for (const at::Tensor& t : state.weights) in.emplace_back(t);
  in.emplace_back(x);
  const std::vector<at::Tensor>& ws = state.weights;
  const std::vector<torch::jit::Stack> stacks = record_stacks(plan, in);
  std::vector<Timing> t = measure(iters, {
      [&] { plan.run(in); },
      bare_loop(plan, stacks),
      [&] {
        at::Tensor v = x;
        for (int i = 0; i < nodes; ++i) {
          switch (i % 3) {
            case 0: v = at::add(v, ws[i % kParams]); break;
            case 1: v = at::mul(v, ws[(i + 1) % kParams]); break;
            default: v = at::relu(v); break;
          }
        }
      },
      [&] { model.forward({x}); },
      [&] {
        NoOpObserver observer;
        ScopedNodeObserver observing(observer);
        plan.run(in);
      }});

  std::printf("tiny-tensor chain: %d nodes (add/mul/relu on float32[4]), %d interleaved runs, "
              "1 thread\n", nodes, iters);
  std::printf("  %-34s %14s %14s\n", "", "min ns/node", "median ns/node");
  const char* names[] = {"pt2rt plan (ExecutionPlan::run)", "bare callBoxed, prebuilt stacks",
                         "eager LibTorch (typed at:: calls)", "Model::forward (eval)",
                         "plan with a no-op NodeObserver"};
  for (size_t i = 0; i < t.size(); ++i) {
    std::printf("  %-34s %14.1f %14.1f\n", names[i], t[i].min_ns / nodes, t[i].median_ns / nodes);
  }
  std::printf("  interpreter overhead per node (min): %.1f ns (plan - bare); plan/bare %.2fx, "
              "plan/eager %.2fx\n", (t[0].min_ns - t[1].min_ns) / nodes,
              t[0].min_ns / t[1].min_ns, t[0].min_ns / t[2].min_ns);
  std::printf("  observation cost per node (min): %.1f ns (observed - plan)\n",
              (t[4].min_ns - t[0].min_ns) / nodes);
}

std::vector<c10::IValue> example_inputs(const ModelState& s, const CompiledGraph& g) {
  const Program& p = *s.program;
  std::vector<at::Tensor> user;
  if (!p.examples.empty()) {
    for (const TensorData& t : p.examples[0].inputs) {
      user.push_back(at::from_blob(const_cast<uint8_t*>(t.data.data()), t.sizes,
                                   at::TensorOptions().dtype(t.dtype)).clone());
    }
  }
  std::vector<c10::IValue> in;
  const Graph& graph = g.graph();
  for (size_t i = 0; i < g.bindings.inputs.size(); ++i) {
    const InputBinding& b = g.bindings.inputs[i];
    if (b.source == InputSource::Weight) {
      in.emplace_back(s.weights[b.index]);
    } else if (b.source == InputSource::UserInput && b.index < user.size()) {
      in.emplace_back(user[b.index]);
    } else {
      const TensorMeta& m = *graph.values[graph.inputs[i].value].meta;
      std::vector<int64_t> sizes;
      for (const Dim& d : m.sizes) sizes.push_back(d.value);
      in.emplace_back(at::ones(sizes, at::TensorOptions().dtype(m.dtype)));
    }
  }
  return in;
}

void archive_benchmark(const std::string& path, int iters) {
  Model model = Model::load(path);
  const ModelState& s = model_state(model);
  std::printf("\n%s (min over runs)\n  %-10s %6s %12s %12s %14s\n", path.c_str(), "graph",
              "nodes", "plan us", "bare us", "overhead/node");
  for (const auto* g : {&s.inference, &s.forward, &s.backward}) {
    if (!g->has_value()) continue;
    const CompiledGraph& cg = **g;
    // Backward inputs: the forward's saved values would be ideal; ones of the recorded
    // shapes run the same kernels on tensors of the same sizes.
    std::vector<c10::IValue> in = example_inputs(s, cg);
    c10::InferenceMode guard;
    const std::vector<torch::jit::Stack> stacks = record_stacks(*cg.plan, in);
    std::vector<Timing> t = measure(iters, {[&] { cg.plan->run(in); }, bare_loop(*cg.plan, stacks)});
    double plan_ns = t[0].min_ns, bare_ns = t[1].min_ns;
    size_t n = cg.plan->instructions().size();
    std::printf("  %-10s %6zu %12.1f %12.1f %11.1f ns\n", to_string(cg.graph().role), n,
                plan_ns / 1000, bare_ns / 1000, (plan_ns - bare_ns) / std::max<size_t>(n, 1));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 300, iters = 2000;
  std::vector<std::string> archives;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--nodes") && i + 1 < argc) nodes = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
      std::printf("usage: %s [--nodes N] [--iters K] [archive.pt2 ...]\n", argv[0]);
      return 0;
    } else archives.push_back(argv[i]);
  }
  at::set_num_threads(1);
  chain_benchmark(nodes, iters);
  for (const std::string& a : archives) archive_benchmark(a, std::max(10, iters / 20));
  return 0;
}
