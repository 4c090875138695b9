// runtime/core/run_cost.h — what one node of a graph costs to run, from the shapes the
// meta device computed for it (used by meta_check.h to bound a run at load).
//
// Work is counted in element operations:
//   * every node: the elements of its tensor arguments and results (it reads and writes
//     them at least once), plus kNodeOverhead for dispatch;
//   * contractions (mm, bmm, addmm, matmul, linear, einsum, tensordot, bilinear, cdist, the
//     attention kernels): output elements × contraction length;
//   * convolutions (every op with "conv" in its name and a `weight` argument, forward,
//     transposed and backward): max(input, output elements) × the weight's elements per
//     output channel (× 2 for the backward's two products);
//   * pooling (a `kernel_size` argument): max(input, output elements) × the window's size;
//   * O(n^3) linear algebra (linalg_*, cholesky, svd, qr, inverse, solve, matrix_exp, ...):
//     batch × n^3 for the largest trailing matrix dimension n;
//   * sorting, top-k and FFTs: n log2 n; recurrent networks: steps × parameters;
//     embedding bags: indices × embedding width; CTC losses: time × batch × target length.
// Scratch bytes are the buffers a kernel allocates beyond its results: convolutions on CPU
// unfold their input (im2col), input elements × kernel volume.
//
// All arithmetic saturates at UINT64_MAX (never wraps): an archive's sizes are untrusted.
#pragma once

#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <cstdint>

namespace pt2rt {

struct NodeCost {
  uint64_t work = 0;           ///< element operations
  uint64_t scratch_bytes = 0;  ///< transient bytes beyond the node's results
  /// Bytes a kernel may allocate to reorder a weight (oneDNN's blocked layouts, at most 256×
  /// the weight, which the archive holds): allowed by the allocation cap of a kernel without a
  /// Meta kernel (meta_check.cpp), not counted in the run's peak (a transient of one kernel).
  uint64_t reorder_bytes = 0;
};

/// Per-node dispatch cost, in element operations (~1 µs of a kernel call).
inline constexpr uint64_t kNodeOverhead = 1000;

/// The cost of one call of an op with `schema`, whose arguments were `args` (schema order)
/// and whose results are `results`, all as computed on the meta device.
NodeCost node_cost(const c10::FunctionSchema& schema, const torch::jit::Stack& args,
                   const torch::jit::Stack& results);

/// a + b and a × b, saturating at UINT64_MAX.
uint64_t sat_add(uint64_t a, uint64_t b);
uint64_t sat_mul(uint64_t a, uint64_t b);

}  // namespace pt2rt
