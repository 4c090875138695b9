// pt2rt::lstm / pt2rt::lstm_backward native kernels (runtime/kernels/rnn_ops.h): ATen's lstm and its
// autograd gradients exactly, shapes only on the meta device, every bad size refused, and the
// run-cost estimate (runtime/core/run_cost.h).
#include "catch_compat.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "kernels/native_ops.h"
#include "native_op_call.h"
#include "kernels/rnn_ops.h"
#include "core/run_cost.h"

namespace pt2rt {
using test::Contains;
using test::run;

namespace {

struct Case {
  at::Tensor input;
  std::vector<at::Tensor> hx, params;
  int64_t layers = 2;
  bool bidirectional = true, batch_first = true, train = true;
  double dropout = 0;
};

// input [B=3, T=5, I=6], hidden 7, 2 layers, bidirectional, biases
Case make_case() {
  at::manual_seed(0);
  Case c;
  c.input = at::randn({3, 5, 6});
  c.hx = {at::randn({4, 3, 7}), at::randn({4, 3, 7})};
  for (int64_t l = 0; l < 2; ++l) {
    for (int d = 0; d < 2; ++d) {
      c.params.push_back(at::randn({28, l == 0 ? 6 : 14}));
      c.params.push_back(at::randn({28, 7}));
      c.params.push_back(at::randn({28}));
      c.params.push_back(at::randn({28}));
    }
  }
  return c;
}

torch::jit::Stack forward_args(const Case& c) {
  return {c.input, c10::List<at::Tensor>(c.hx), c10::List<at::Tensor>(c.params), true, c.layers,
          c.dropout, c.train, c.bidirectional, c.batch_first};
}

std::vector<at::Tensor> leaves_of(const Case& c) {
  std::vector<at::Tensor> v{c.input, c.hx[0], c.hx[1]};
  v.insert(v.end(), c.params.begin(), c.params.end());
  for (at::Tensor& t : v) t = t.detach().clone().requires_grad_(true);
  return v;
}

}  // namespace

TEST_CASE("rnn_ops: pt2rt::lstm and lstm_backward are ATen's lstm and its gradients", "[rnn_ops]") {
  const Case c = make_case();
  const size_t stashed = rnn_stash_size();
  const torch::jit::Stack out = run("pt2rt::lstm", forward_args(c));
  REQUIRE(out.size() == 3);
  CHECK(rnn_stash_size() == stashed + 1);  // a training-mode forward keeps its graph
  std::vector<at::Tensor> leaves = leaves_of(c);
  auto want = at::lstm(leaves[0], {leaves[1], leaves[2]},
                       std::vector<at::Tensor>(leaves.begin() + 3, leaves.end()), true, 2, 0.0,
                       true, true, true);
  CHECK(at::equal(out[0].toTensor(), std::get<0>(want)));
  CHECK(out[0].toTensor().sizes() == at::IntArrayRef({3, 5, 14}));
  CHECK(at::equal(out[1].toTensor(), std::get<1>(want)));
  CHECK(at::equal(out[2].toTensor(), std::get<2>(want)));

  const at::Tensor g0 = at::randn({3, 5, 14}), g2 = at::randn({4, 3, 7});
  torch::jit::Stack args{g0, c10::IValue(), g2};  // grad_h_n None: zeros
  for (const c10::IValue& v : forward_args(c)) args.push_back(v);
  const auto ref = torch::autograd::grad({std::get<0>(want), std::get<2>(want)}, leaves, {g0, g2});
  for (const char* pass : {"through the forward's graph", "recomputed"}) {
    INFO(pass);
    const torch::jit::Stack back = run("pt2rt::lstm_backward", args);
    CHECK(rnn_stash_size() == stashed);
    REQUIRE(back.size() == 1);
    const std::vector<at::Tensor> got = back[0].toTensorVector();
    REQUIRE(got.size() == leaves.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("gradient " << i);
      CHECK(at::equal(got[i], ref[i]));
    }
  }
  // An in-place write to an argument after the forward: its graph is not used (recomputed).
  run("pt2rt::lstm", forward_args(c));
  CHECK(rnn_stash_size() == stashed + 1);
  c.params[0].add_(0.5);
  const std::vector<at::Tensor> moved = run("pt2rt::lstm_backward", args)[0].toTensorVector();
  CHECK(rnn_stash_size() == stashed + 1);  // not taken
  CHECK_FALSE(at::equal(moved[3], ref[3]));  // the new weights' gradients
}

TEST_CASE("rnn_ops: pt2rt::gru / rnn_tanh / rnn_relu and their backwards are ATen's ops and "
          "gradients", "[rnn_ops]") {
  struct Kind {
    const char* name;
    int64_t gates;
  };
  for (const Kind k : {Kind{"gru", 3}, Kind{"rnn_tanh", 1}, Kind{"rnn_relu", 1}}) {
    INFO(k.name);
    at::manual_seed(0);
    // input [B=3, T=5, I=6], hidden 7, 1 layer, one direction, biases, batch_first
    const at::Tensor input = at::randn({3, 5, 6}), hx = at::randn({1, 3, 7});
    const std::vector<at::Tensor> params = {at::randn({7 * k.gates, 6}),
                                            at::randn({7 * k.gates, 7}),
                                            at::randn({7 * k.gates}), at::randn({7 * k.gates})};
    const torch::jit::Stack flags{true, int64_t{1}, 0.0, true, false, true};
    torch::jit::Stack args{input, hx, c10::List<at::Tensor>(params)};
    args.insert(args.end(), flags.begin(), flags.end());
    const std::string op = std::string("pt2rt::") + k.name;
    const torch::jit::Stack out = run(op.c_str(), args);
    REQUIRE(out.size() == 2);
    std::vector<at::Tensor> leaves{input, hx};
    leaves.insert(leaves.end(), params.begin(), params.end());
    for (at::Tensor& t : leaves) t = t.detach().clone().requires_grad_(true);
    const std::vector<at::Tensor> lp(leaves.begin() + 2, leaves.end());
    std::tuple<at::Tensor, at::Tensor> want =
        std::string(k.name) == "gru"
            ? at::gru(leaves[0], leaves[1], lp, true, 1, 0.0, true, false, true)
        : std::string(k.name) == "rnn_tanh"
            ? at::rnn_tanh(leaves[0], leaves[1], lp, true, 1, 0.0, true, false, true)
            : at::rnn_relu(leaves[0], leaves[1], lp, true, 1, 0.0, true, false, true);
    CHECK(at::equal(out[0].toTensor(), std::get<0>(want)));
    CHECK(at::equal(out[1].toTensor(), std::get<1>(want)));
    const at::Tensor g1 = at::randn({1, 3, 7});
    torch::jit::Stack bargs{c10::IValue(), g1};  // grad_output None: zeros
    bargs.insert(bargs.end(), args.begin(), args.end());
    const std::vector<at::Tensor> got =
        run((op + "_backward").c_str(), bargs)[0].toTensorVector();
    const auto ref = torch::autograd::grad({std::get<1>(want)}, leaves, {g1});
    REQUIRE(got.size() == leaves.size());
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("gradient " << i);
      CHECK(at::equal(got[i], ref[i]));
    }
    args[1] = at::randn({2, 3, 7});  // hx of two layers for a one-layer cell
    try {
      run(op.c_str(), args);
      FAIL("accepted a wrong hx");
    } catch (const c10::Error& e) {
      CHECK_THAT(std::string(e.what_without_backtrace()), Contains(op + ": hx 0 has sizes"));
    }
  }
}

TEST_CASE("rnn_ops: meta tensors give the result shapes", "[rnn_ops]") {
  Case c = make_case();
  c.input = at::empty({3, 5, 6}, at::device(at::kMeta));
  for (at::Tensor& t : c.hx) t = at::empty(t.sizes(), at::device(at::kMeta));
  for (at::Tensor& t : c.params) t = at::empty(t.sizes(), at::device(at::kMeta));
  const torch::jit::Stack out = run("pt2rt::lstm", forward_args(c));
  CHECK(out[0].toTensor().is_meta());
  CHECK(out[0].toTensor().sizes() == at::IntArrayRef({3, 5, 14}));
  CHECK(out[1].toTensor().sizes() == at::IntArrayRef({4, 3, 7}));
  torch::jit::Stack args{c10::IValue(), c10::IValue(), c10::IValue()};
  for (const c10::IValue& v : forward_args(c)) args.push_back(v);
  const std::vector<at::Tensor> grads = run("pt2rt::lstm_backward", args)[0].toTensorVector();
  REQUIRE(grads.size() == 3 + c.params.size());
  CHECK(grads[0].sizes() == at::IntArrayRef({3, 5, 6}));
  CHECK(grads[4].sizes() == at::IntArrayRef({28, 7}));
}

TEST_CASE("rnn_ops: arguments that do not fit the LSTM layout are refused by name", "[rnn_ops]") {
  auto fails = [](const Case& c, const std::string& what) {
    test::check_refused("pt2rt::lstm", forward_args(c), what);
  };
  Case c = make_case();
  c.params.pop_back();
  fails(c, "expected 16 params");
  c = make_case();
  c.params[5] = at::randn({28, 8});  // layer 0 reverse w_hh
  fails(c, "param 5 has sizes");
  c = make_case();
  c.params[8] = at::randn({28, 6});  // layer 1 w_ih takes D * H = 14 features
  fails(c, "param 8 has sizes");
  c = make_case();
  c.hx[1] = at::randn({4, 2, 7});
  fails(c, "hx 1 has sizes");
  c = make_case();
  c.params[0] = c.params[0].to(at::kDouble);
  fails(c, "param 0 must be a Float tensor");
  c = make_case();
  c.dropout = 0.5;
  fails(c, "dropout between layers in training mode");
  c.train = false;  // eval: dropout unused
  CHECK(run("pt2rt::lstm", forward_args(c)).size() == 3);
  c = make_case();
  c.layers = 0;
  fails(c, "num_layers 0");
}

TEST_CASE("rnn_ops: work is T x B x weights (x3 for the backward), its activations scratch",
          "[rnn_ops]") {
  const Case c = make_case();
  const NativeOp* fwd = find_native_op("pt2rt::lstm", "");
  const NativeOp* bwd = find_native_op("pt2rt::lstm_backward", "");
  REQUIRE((fwd && bwd));
  const torch::jit::Stack args = forward_args(c);
  const torch::jit::Stack fwd_out = run("pt2rt::lstm", args);
  torch::jit::Stack bargs{fwd_out[0], fwd_out[1], fwd_out[2]};
  for (const c10::IValue& v : args) bargs.push_back(v);
  const torch::jit::Stack bwd_out = run("pt2rt::lstm_backward", bargs);
  uint64_t weights = 0;
  for (const at::Tensor& p : c.params) weights += static_cast<uint64_t>(p.numel());
  const uint64_t f = node_cost(fwd->schema, args, fwd_out).work;
  const uint64_t b = node_cost(bwd->schema, bargs, bwd_out).work;
  CHECK(f >= 15 * weights);  // T * B = 15 rows through every weight
  CHECK(f < 20 * weights);  // + the input and state elements, each once more
  CHECK(b >= 3 * 15 * weights);
  // the recomputation's activations: 15 rows x 4 layer-directions x (6 + 8 x 7) floats
  CHECK(node_cost(bwd->schema, bargs, bwd_out).scratch_bytes == 15 * 4 * (6 + 56) * 4);
  CHECK(node_cost(fwd->schema, args, fwd_out).scratch_bytes == 0);
}

}  // namespace pt2rt
