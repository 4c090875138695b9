// runtime/plan/onednn_benchmark.cpp — see onednn_benchmark.h.
#include "plan/onednn_benchmark.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

namespace pt2rt {
namespace {

/// Seconds of the fastest of OneDnnBenchmark::kRepeats calls of `f`, after one warm-up call.
template <typename F>
double fastest(F&& f) {
  f();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < OneDnnBenchmark::kRepeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

/// The product of `sizes`, or -1 above OneDnnBenchmark::kMaxElements or for a negative size.
int64_t elements(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    if (s < 0 || (s > 0 && n > OneDnnBenchmark::kMaxElements / s)) return -1;
    n *= s;
  }
  return n;
}

/// The output's element count of a consistent Conv2dCase, or -1 (see conv_macs).
int64_t conv_output_elements(const Conv2dCase& c) {
  if (c.input.size() != 4 || c.weight.size() != 4 || c.stride.size() != 2 ||
      c.padding.size() != 2 || c.dilation.size() != 2 || elements(c.input) < 0 ||
      elements(c.weight) < 0 || c.groups < 1 || c.groups > OneDnnBenchmark::kMaxElements ||
      c.weight[0] % c.groups != 0 || c.weight[1] * c.groups != c.input[1]) {
    return -1;  // every size is now <= kMaxElements (2^24): the products below fit int64
  }
  std::vector<int64_t> output{c.input[0], c.weight[0], 0, 0};
  for (size_t d = 0; d < 2; ++d) {
    if (c.stride[d] < 1 || c.dilation[d] < 1 || c.padding[d] < 0 ||
        c.padding[d] > OneDnnBenchmark::kMaxElements ||
        c.dilation[d] > OneDnnBenchmark::kMaxElements) {
      return -1;
    }
    const int64_t span = c.dilation[d] * (c.weight[2 + d] - 1) + 1;
    const int64_t room = c.input[2 + d] + 2 * c.padding[d] - span;
    if (room < 0) return -1;
    output[2 + d] = room / c.stride[d] + 1;
  }
  return elements(output);
}

}  // namespace

int64_t OneDnnBenchmark::conv_macs(const Conv2dCase& c) {
  const int64_t out = conv_output_elements(c);
  return out < 0 ? -1 : out * (c.weight[1] * c.weight[2] * c.weight[3]);  // both <= 2^24
}

int64_t OneDnnBenchmark::linear_macs(const LinearCase& c) {
  for (int64_t s : {c.rows, c.in, c.out}) {
    if (s < 1 || s > kMaxElements) return -1;
  }
  if (elements({c.rows, c.in}) < 0 || elements({c.out, c.in}) < 0 ||
      elements({c.rows, c.out}) < 0) {
    return -1;
  }
  return (c.rows * c.in) * c.out;  // both factors <= 2^24
}

bool OneDnnBenchmark::afford(int64_t macs, int64_t bytes) {
  const int64_t cost = macs * 2 * (kRepeats + 1);  // macs <= kMaxMacs: no overflow
  if (macs < 1 || macs > kMaxMacs || cost > macs_left_ || bytes < 0 ||
      static_cast<uint64_t>(bytes) > case_bytes_) {
    return false;
  }
  macs_left_ -= cost;
  return true;
}

template <typename Case, typename Race>
bool OneDnnBenchmark::decide(std::map<Case, bool>& decided, const Case& c, int64_t macs,
                             int64_t bytes, Race&& race) {
  const auto known = decided.find(c);
  if (known != decided.end()) return known->second;
  bool faster = false;
  if (afford(macs, bytes)) {
    try {
      c10::NoGradGuard no_grad;
      const auto [aten, onednn] = race();
      faster = onednn < 0.95 * aten;
    } catch (const c10::Error&) {
      faster = false;
    }
  }
  decided.emplace(c, faster);
  return faster;
}

bool OneDnnBenchmark::conv_faster(const Conv2dCase& c) {
  // float32 input, output, bias, weight and its packed copy (each <= 2^24 elements)
  const int64_t out = conv_output_elements(c);
  const int64_t bytes =
      out < 0 ? -1 : 4 * (elements(c.input) + 2 * elements(c.weight) + out + c.weight[0]);
  return decide(convs_, c, conv_macs(c), bytes, [&] {
    const at::Tensor x = at::full(c.input, 0.5f), w = at::full(c.weight, 0.25f);
    const c10::optional<at::Tensor> b =
        c.bias ? c10::optional<at::Tensor>(at::full({c.weight[0]}, 0.125f)) : c10::nullopt;
    const at::Tensor packed =
        at::mkldnn_reorder_conv2d_weight(w.to_mkldnn(), c.padding, c.stride, c.dilation, c.groups);
    return std::make_pair(fastest([&] {
                            at::convolution(x, w, b, c.stride, c.padding, c.dilation,
                                            /*transposed=*/false, {0, 0}, c.groups);
                          }),
                          fastest([&] {
                            at::mkldnn_convolution(x, packed, b, c.padding, c.stride,
                                                   c.dilation, c.groups);
                          }));
  });
}

bool OneDnnBenchmark::linear_faster(const LinearCase& c) {
  // float32 input, output (and their oneDNN copies), weight and its packed copy, bias
  const int64_t m = linear_macs(c);
  const int64_t bytes =
      m < 0 ? -1 : 4 * (2 * c.rows * c.in + 2 * c.rows * c.out + 2 * c.out * c.in + c.out);
  return decide(linears_, c, m, bytes, [&] {
    const at::Tensor x = at::full({c.rows, c.in}, 0.5f), w = at::full({c.out, c.in}, 0.25f);
    const at::Tensor b = at::full({c.out}, 0.125f), wt = w.t(), packed = w.to_mkldnn();
    const c10::optional<at::Tensor> bias = c.bias ? c10::optional<at::Tensor>(b) : c10::nullopt;
    return std::make_pair(
        fastest([&] { c.bias ? at::addmm(b, x, wt) : at::mm(x, wt); }),
        fastest([&] { at::mkldnn_linear(x.to_mkldnn(), packed, bias).to_dense(); }));
  });
}

}  // namespace pt2rt
