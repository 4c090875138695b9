// runtime/core/batched_copy.h — copies of several tensors in one kernel launch where LibTorch
// can (CUDA graphs' static inputs, outputs and gradients: exec/cuda_graphs.h).
//
// A replayed CUDA graph is one launch; what stays outside it is copying user inputs into its
// static buffers and its static outputs and gradients out, one tensor at a time — on CUDA a
// cudaMemcpyAsync each, whose host cost is several kernel launches' (torch.profiler on an
// H200: ~86 us a call against ~18 us per kernel launch while profiling). These helpers make
// those copies ONE `at::_foreach_copy_` (LibTorch >= 2.2; its CUDA kernel is
// multi_tensor_apply's, as torch.optim's foreach implementations use) where every pair has
// the same dtype, device, sizes and strides; any other pair, and older LibTorch, take
// Tensor::copy_ one by one. Results are identical either way (a copy).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace pt2rt {

/// dst[i].copy_(src[i]) for every i where both are defined. Sizes must match pairwise
/// (c10::Error otherwise, as Tensor::copy_ throws); dst.size() == src.size().
void copy_all(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src);

/// A copy of every defined tensor of `src` (undefined stay undefined): the source's strides
/// where it is non-overlapping and dense (as Tensor::clone() keeps them), else contiguous.
std::vector<at::Tensor> clone_all(const std::vector<at::Tensor>& src);

}  // namespace pt2rt
