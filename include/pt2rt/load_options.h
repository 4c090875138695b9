// pt2rt/load_options.h — what Model::load lets an archive do, and what it may cost.
//
// The defaults are pt2rt's policy for an untrusted archive (docs/security.md "Running an untrusted
// archive"): only operators a pt2rt exporter can emit, and a run whose memory and work were
// bounded at load from shapes checked against the kernels' meta functions. A caller that trusts
// an archive, or runs custom ops, widens them explicitly here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pt2rt/limits.h"

namespace pt2rt {

/// Bounds on running the model, checked at load: `max_bytes` per graph run (an inference
/// call; a training forward; its backward), `max_work` for one inference call plus one
/// training step together (what `export-cli verify` runs). Every graph is first run on the
/// meta device (c10::DeviceType::Meta), where
/// each node's outputs must match the dtype and sizes the archive declares, then
///   bytes = the peak of the bytes held by live tensors during the run (graph inputs and
///           weights included; views share their base's storage; liveness as the plan
///           releases values), plus the scratch space of convolutions (im2col columns);
///   work  = the sum over nodes of the elements each reads and writes, plus multiply-adds of
///           contractions (mm, bmm, addmm, convolutions, einsum, ...), window reductions
///           (pooling) and O(n^3) linear algebra, plus a fixed cost per node for dispatch.
/// A graph over either bound is refused with FormatError naming the figures (and the fields
/// and export-cli flags that raise them: --max-run-bytes, --max-run-work, --trusted).
/// Dynamic shapes (runtime/README.md "Dynamic shapes"): the meta run uses every symbol's
/// range maximum, which bounds every call. A program over the bounds there is refused only if
/// it is over them at the range minima too; otherwise it loads and each call (Model::forward)
/// is checked before anything runs against the figures of the graphs it runs (an inference
/// call: the inference graph's bytes and work; a training forward: the forward's and the
/// backward's bytes, their work together), at its symbol values rounded up to 3 significant bits (m * 2^k, m in 4..7; at most 25% more, capped at
/// the maximum; each such cell computed once on the meta device and cached): a call over the
/// bounds throws InputError naming the symbol values (`batch=1000`), the figure and the bound.
/// A program within the bounds at its maxima is not checked per call. 0 means the
/// default, which grows with the archive's size S:
///   bytes  max(32 MiB, 16 × S)
///   work   max(5·10^8, 500 × S × max(1, S / 1 MiB))
/// So an archive of at most 1 MiB runs at most 5·10^8 element operations in all and 32 MiB of
/// tensors per graph (load + run + verify of any such archive: under 2 s and 256 MB here, docs/security.md
/// "Running an untrusted archive"), while the archive of a real model — whose compute grows
/// with its parameters times its activations — stays far inside its bound (resnet18 at batch
/// 2: 3 × S bytes, 900 × S work, against 16 × S and 43000 × S).
struct RunLimits {
  uint64_t max_bytes = 0;  ///< per-graph peak tensor bytes; 0: the default above
  uint64_t max_work = 0;   ///< element operations of inference + training step; 0: default
  /// Sentinel for "no bound" (a trusted archive).
  static constexpr uint64_t kUnlimited = UINT64_MAX;

  static constexpr uint64_t kBytesFloor = uint64_t{32} << 20;
  static constexpr uint64_t kBytesPerArchiveByte = 16;
  static constexpr uint64_t kWorkFloor = 500000000ull;
  static constexpr uint64_t kWorkPerArchiveByte = 500;

  /// The bounds that apply to an archive of `archive_bytes` bytes.
  RunLimits resolved(uint64_t archive_bytes) const;
};

/// LoadOptions::cuda_graphs: calls of an input shape run without a graph this many times
/// before the next is captured (lazy initialisation stays out of the capture).
constexpr int kCudaGraphWarmupRuns = 2;

struct LoadOptions {
  ArchiveLimits archive;
  RunLimits run;
  /// Operators the caller trusts beyond pt2rt's operator policy (schema/README.md "Operator
  /// policy"): "ns::name" allows every overload, "ns::name.overload" one. For custom ops
  /// registered with TORCH_LIBRARY (other namespaces than aten), or ATen ops the policy
  /// refuses. An allowed op must still exist in the running LibTorch.
  std::vector<std::string> allow_operators;
  /// Programs with symbolic sizes (dynamic shapes) are checked on the meta device at every
  /// symbol's range maximum, which bounds every call (runtime/README.md "Dynamic shapes"). A
  /// symbol without an upper bound has no worst case: such a program is refused unless this
  /// is set (for archives from a trusted source), and is then checked at its hints only.
  bool allow_symbolic_shapes = false;
  /// Memory-map the archive file instead of reading it (Model::load from a path, CPU device):
  /// program.fb is decoded in place and every weight is a tensor viewing its entry in the
  /// mapping (pt2rt/mapped_weights.h), so load costs O(metadata) and resident memory grows
  /// only by the pages a run touches (shared with the page cache). Every check of a read
  /// load applies (entry names and layout, data inside the file, STORED, 64-byte alignment,
  /// sizes, the decode budget, the meta-device run bounds); the entries' CRC-32 are checked
  /// on a background thread started at load (check_mapped_weights), off the load's path.
  /// The mapping is private copy-on-write: training and in-place updates work, each written
  /// page becoming a private copy; the file is never modified. The file must not be
  /// truncated or rewritten in place while the model lives (a truncated mapping faults with
  /// SIGBUS on access, as any mmap; pt2rt's own writers replace files by rename, which is
  /// safe). Ignored for Model::load from memory; for a non-CPU device the weights are read
  /// from the mapping and copied to the device.
  bool map_weights = false;
  /// With map_weights: check every weight entry's CRC-32 (the file read once more through
  /// libzip) on a thread started by the load; the first forward() waits for it and, when an
  /// entry's bytes differ from what was written, throws FormatError naming the entry — as
  /// that call and every later one does — so no call runs corrupted weights. false: the
  /// caller accepts running the mapped bytes unchecked (export-cli --map-unchecked).
  bool check_mapped_weights = true;
  /// Compile, check and keep only the inference graph (a deployment that never trains): the
  /// forward and backward graphs are neither compiled nor run on the meta device, which
  /// roughly thirds the O(nodes) part of a load (with map_weights, nearly all of it).
  /// program.fb is still decoded and validated whole, and every operator of every graph must
  /// still resolve, so an archive this load accepts is one a full load accepts, bar the
  /// training graphs' meta check. Model::train() then throws pt2rt::Error; Model::save writes
  /// the program unchanged (training graphs included). Like `torch::jit::load` of a traced
  /// eval-mode module, which has no backward either.
  /// The inference plan then caches the values it computes from weights alone (e.g. BatchNorm
  /// folded into convolution weights by export(optimize_inference=True)) until a weight
  /// changes, and runs each CPU float32 2-D convolution that ATen itself runs through oneDNN
  /// on a weight packed once into oneDNN's blocked layout (runtime/kernels/conv_prepack.h; results are
  /// ATen's bits), as `torch.jit.freeze` + `optimize_for_inference` or TorchInductor's CPU
  /// freezing do. A weight change must then go through the tensor (an in-place op, `copy_`,
  /// `set_`): writes through `Tensor::data()` are not seen (runtime/plan/weight_cache.h). A load
  /// that may train caches only views of weights, because torch::optim writes that way.
  /// @throws pt2rt::InputError at load when the archive has no inference graph.
  bool inference_only = false;
  /// With inference_only, on CPU: time each eligible float32 2-D convolution and linear layer
  /// (`addmm` / `mm` on a weight) at load, at its declared sizes and the current intra-op
  /// thread count, both with ATen's own kernel and with oneDNN on a packed weight, and run the
  /// faster (runtime/plan/onednn_benchmark.h, conv_prepack.h, linear_prepack.h), as
  /// `torch.backends.cudnn.benchmark` picks cuDNN algorithms. ATen sends small-batch
  /// convolutions to im2col + GEMM and linear layers to the BLAS: with Debian's default
  /// reference BLAS, oneDNN is ~12x faster on resnet18 at batch 1 and ~10x on a batch-32 MLP
  /// (docs/performance.md). Results then differ from eager PyTorch by float rounding where
  /// oneDNN replaces ATen's kernel, and the choice may differ between loads. Load takes longer:
  /// each distinct layer runs 8 times (bounded: runtime/plan/onednn_benchmark.h). Ignored for other
  /// devices (for CUDA, set `at::globalContext().setBenchmarkCuDNN(true)`).
  bool onednn_benchmark = false;
  /// On CUDA: record each inference call (Model::forward in eval mode, or under no-grad) into
  /// a CUDA graph once per input-shape key and replay it, as torch.cuda.make_graphed_callables
  /// / torch.compile(mode="reduce-overhead") do: a call then costs one graph launch plus the
  /// copies of its inputs and outputs instead of one launch per kernel
  /// (runtime/exec/inference_graphs.h). Training calls likewise: the forward and its backward
  /// each replay a graph (runtime/exec/training_graphs.h: saved activations stay in the
  /// graphs' memory pool; while a replayed forward's backward is still to come, further
  /// forwards of its key run without the graph). The first kCudaGraphWarmupRuns calls of a
  /// key run normally; a call that cannot be captured (it synchronises with the host, e.g. a
  /// data-dependent size, or draws from the CPU generator) is run normally from then on, with
  /// a warning naming the reason. Parameters and buffers are read and written at their own
  /// addresses, so a replay sees their current values (optimizers update them in place);
  /// dropout stays random across replays (the CUDA generator's Philox offset advances).
  /// Ignored on other devices. Model::cuda_graph_report() says what was captured.
  /// @throws pt2rt::InputError at load on CUDA when pt2rt was built without CUDA.
  bool cuda_graphs = false;
  /// With cuda_graphs: the most input-shape keys captured, for inference and for training
  /// each (a dynamic archive's calls of further shapes run without a graph). Each graph keeps its inputs', outputs' and
  /// intermediates' memory in the model's private CUDA graph pool.
  size_t max_cuda_graphs = 8;
};

}  // namespace pt2rt
