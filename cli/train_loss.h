// cli/train_loss.h — the loss of `export-cli train`: which user output it is computed on,
// which loss function, and the checks that refuse an output the loss cannot use (one line,
// before the first step) instead of training on the wrong tensor.
//
// Losses (ATen's, as torch.nn.functional computes them):
//   cross_entropy  at::cross_entropy_loss(output, targets): int64 class targets [N, d1...]
//                  with an output [N, C, d1...], or float probabilities shaped like the output;
//   mse            at::mse_loss(output, targets): targets shaped like the output (no broadcast);
//   output         the chosen output *is* the loss (a model whose forward computes it,
//                  `forward(x, y) -> loss`): a floating-point scalar; the targets are passed
//                  to the model as its last input.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pt2rt/program.h"
#include "tensor_io.h"

namespace pt2rt::cli {

struct LossSpec {
  std::string kind = "cross_entropy";  ///< cross_entropy | mse | output
  size_t output = 0;                   ///< position among the user outputs (Plain index order)
  std::string label;                   ///< "output 0 ['logits'] (mul) float32[4, 6]"
};

/// @throws UsageError unless `loss` is cross_entropy, mse or output.
void check_loss_kind(const std::string& loss);

/// Validates `--loss` and `--output` against the archive's training signature (the forward graph)
/// and `data`: input count, the output's dtype and shape vs the loss and the targets.
/// `batch` is the batch size the run uses (dim 0 of every input and of the output).
/// `--output` names one user output as `export-cli inspect` lists it: its index ("1"), its
/// stored name (Program::output_names, with or without brackets and quotes: "['logits']" or
/// "logits"; "[1]" or "1"; ".field" or "field") or its graph value's name ("mul"); without it,
/// output 0. A name two outputs answer to, or none does, is a UsageError listing the outputs.
/// @throws UsageError naming the option, the output and why it cannot be used.
LossSpec choose_loss(const Program& program, const std::string& loss,
                     const std::optional<std::string>& output, const Dataset& data, int64_t batch);

/// The model's inputs for samples `idx` (int64 indices into `data`) on `device`: the data's
/// inputs, plus the targets last for `--loss output`.
std::vector<at::Tensor> model_inputs(const LossSpec& spec, const Dataset& data,
                                     const at::Tensor& idx, c10::Device device);

/// The loss of one batch from the model's outputs; `reduction` is at::Reduction::Mean or Sum
/// (for `output` the model's own value is returned, whatever `reduction` says).
at::Tensor compute_loss(const LossSpec& spec, const std::vector<at::Tensor>& outputs,
                        const at::Tensor& targets, int64_t reduction);

/// Checks the targets' dtype and rank against the loss before the first step.
/// @throws UsageError prefixed with `what` (e.g. "--data").
void check_targets(const std::string& loss, const at::Tensor& targets, const std::string& what);

}  // namespace pt2rt::cli
