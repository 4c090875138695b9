// pt2rt/load_options.h — what Model::load lets an archive do, and what it may cost.
//
// The defaults are pt2rt's policy for an untrusted archive (README "Running an untrusted
// archive"): only operators a pt2rt exporter can emit, and a run whose memory and work were
// bounded at load from shapes checked against the kernels' meta functions. A caller that trusts
// an archive, or runs custom ops, widens them explicitly here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pt2rt/limits.h"

namespace pt2rt {

/// Bounds on one run of one graph (an inference call; a training forward; its backward),
/// checked at load: every graph is first run on the meta device (c10::DeviceType::Meta), where
/// each node's outputs must match the dtype and sizes the archive declares, then
///   bytes = the peak of the bytes held by live tensors during the run (graph inputs and
///           weights included; views share their base's storage; liveness as the plan
///           releases values), plus the scratch space of convolutions (im2col columns);
///   work  = the sum over nodes of the elements each reads and writes, plus multiply-adds of
///           contractions (mm, bmm, addmm, convolutions, einsum, ...), window reductions
///           (pooling) and O(n^3) linear algebra, plus a fixed cost per node for dispatch.
/// A graph over either bound is refused with FormatError naming the figures. 0 means the
/// default, which grows with the archive: max(floor, factor × archive bytes).
struct RunLimits {
  uint64_t max_bytes = 0;  ///< default: max(64 MiB, 16 × archive bytes)
  uint64_t max_work = 0;   ///< default: max(2·10^9, 2000 × archive bytes) element operations
  /// Sentinel for "no bound" (a trusted archive).
  static constexpr uint64_t kUnlimited = UINT64_MAX;

  static constexpr uint64_t kBytesFloor = uint64_t{64} << 20;
  static constexpr uint64_t kBytesPerArchiveByte = 16;
  static constexpr uint64_t kWorkFloor = 2000000000ull;
  static constexpr uint64_t kWorkPerArchiveByte = 2000;

  /// The bounds that apply to an archive of `archive_bytes` bytes.
  RunLimits resolved(uint64_t archive_bytes) const;
};

struct LoadOptions {
  ArchiveLimits archive;
  RunLimits run;
  /// Operators the caller trusts beyond pt2rt's operator policy (schema/README.md "Operator
  /// policy"): "ns::name" allows every overload, "ns::name.overload" one. For custom ops
  /// registered with TORCH_LIBRARY (other namespaces than aten), or ATen ops the policy
  /// refuses. An allowed op must still exist in the running LibTorch.
  std::vector<std::string> allow_operators;
  /// Programs with symbolic sizes (dynamic shapes) are checked on the meta device at their
  /// hints only, so their run bounds do not cover calls at other sizes: they are refused
  /// unless this is set (for archives from a trusted source).
  bool allow_symbolic_shapes = false;
};

}  // namespace pt2rt
