// runtime/kernels/batch_norm_stats.h — pt2rt::batch_norm_with_stats: a training-mode
// BatchNorm and its running-statistics update in one kernel, as eager PyTorch runs it.
//
// The plan rewrite that puts it in place of the exporter's decomposed update, and why, is
// plan/fuse_batch_norm_stats.h.
#pragma once

#include <c10/util/ArrayRef.h>

#include <cstdint>

#include "kernels/native_ops.h"

namespace pt2rt {

/// pt2rt::batch_norm_with_stats(Tensor input, Tensor? weight, Tensor? bias,
///   Tensor running_mean, Tensor running_var, float momentum, float eps,
///   float unbiased_factor, bool update_in_place) -> (Tensor out, Tensor save_mean,
///   Tensor save_invstd, Tensor new_running_mean, Tensor new_running_var)
/// With update_in_place the new statistics are running_mean / running_var themselves;
/// unbiased_factor 0 stands for the variance-pass form (symbolic per-channel count).
/// Never names an archive node (find_native_op does not know it); only plans make it. The
/// returned object lives for the whole process.
const NativeOp& batch_norm_with_stats_op();

/// Elements per channel of a BatchNorm input of `sizes` (numel / sizes[1]; numel for one
/// dim), the n of the unbiased factor n / (n - 1) the exporter writes.
int64_t batch_norm_per_channel(c10::IntArrayRef sizes);

}  // namespace pt2rt
