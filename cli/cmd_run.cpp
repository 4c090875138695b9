// export-cli run — run a model.pt2 once: inference, or a training forward + backward.
//
//   export-cli run <model.pt2> [--inputs in.pt] [--outputs out.pt] [--device cpu|cuda]
//                  [--train] [--grad-outputs g.pt] [--grads grads.pt] [--buffers buffers.pt]
//                  [--inference-only] [--onednn-benchmark] [--print] [--seed S]
//
// Inputs come from a torch.save file (tuple or list of tensors) or, without --inputs, the
// first bundled example. Each output is printed with its index and stored name
// (Model::signature(): `output 0 ['logits']: float32[4, 10] ...`). Outputs are written as a
// list of tensors; --grads as a dict FQN -> gradient ("input:<i>" for user inputs), --buffers
// as a dict FQN -> value.
#include <ATen/Context.h>
#include <ATen/core/Formatting.h>

#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "options.h"
#include "pt2rt/model.h"
#include "pt2rt/signature.h"
#include "steps.h"
#include "tensor_io.h"

namespace pt2rt::cli {

int cmd_run(int argc, char** argv) {
  cxxopts::Options options = model_options(
      "run",
      "Run a pt2rt archive once and print a summary of the outputs.\n"
      "Default: eval mode (inference graph). --train: training forward "
      "and backward (grad outputs from --grad-outputs, else ones).\n",
      "archive to run");
  // clang-format off
  options.add_options()
      ("inputs", "torch.save file with a tuple/list of input tensors, or a dict {input name: "
       "tensor} (default: the bundled "
                 "example)", cxxopts::value<std::string>())
      ("outputs", "write the outputs here (torch.save list of tensors)",
       cxxopts::value<std::string>())
      ("device", "cpu or cuda[:index]", cxxopts::value<std::string>()->default_value("cpu"))
      ("train", "run the training forward and the backward")
      ("grad-outputs", "with --train: torch.save list, one gradient per differentiable output",
       cxxopts::value<std::string>())
      ("grads", "with --train: write a dict FQN -> gradient here", cxxopts::value<std::string>())
      ("buffers", "write a dict FQN -> buffer value after the call here",
       cxxopts::value<std::string>())
      ("print", "print each output's values (LibTorch's tensor printing)")
      ("seed", "seed every default generator first (torch::manual_seed: the CPU one and each "
       "CUDA device's), so random ops such as dropout with --train draw the same again",
       cxxopts::value<uint64_t>());
  // clang-format on
  add_deployment_options(options);
  add_load_options(options);
  const auto args = parse_model_options(options, argc, argv);
  if (!args) return kExitOk;
  const cxxopts::ParseResult& result = args->result;
  const std::string& path = args->path;
  const c10::Device device = parse_device(result["device"].as<std::string>());
  const bool train = result.count("train") > 0;
  if (!train && (result.count("grad-outputs") || result.count("grads"))) {
    throw UsageError("--grad-outputs and --grads need --train");
  }
  LoadOptions load = load_options(result);
  apply_deployment_options(result, train, device, load);
  std::vector<at::Tensor> inputs, grad_outputs;
  if (result.count("grad-outputs")) {
    grad_outputs = load_tensor_list(result["grad-outputs"].as<std::string>(), "--grad-outputs");
  }

  Model model = Model::load(path, device, load);
  if (result.count("seed")) at::manual_seed(result["seed"].as<uint64_t>());
  if (result.count("inputs")) {
    inputs = load_inputs(result["inputs"].as<std::string>(), "--inputs", model.signature());
  } else {
    const std::vector<Example> examples = model.examples();
    if (examples.empty()) {
      throw UsageError(path + " has no bundled example; give --inputs");
    }
    for (const auto& t : examples[0].inputs) inputs.push_back(to_tensor(t));
    std::cout << "inputs: bundled example '" << examples[0].name << "'\n";
  }
  inputs = to_device(inputs, device);
  if (train && !has_training_graphs(model.program())) {
    throw UsageError(path + " has no forward/backward graphs (exported without training)");
  }

  std::vector<at::Tensor> outputs;
  NamedTensors grads;
  std::ostringstream timing;
  timing << std::fixed << std::setprecision(3);
  // --cuda-graphs: the warm-up calls, then the capture; the printed outputs, gradients and
  // time are a replay's.
  const int calls = load.cuda_graphs ? kCudaGraphWarmupRuns + 2 : 1;
  if (train) {
    TrainStep step;
    for (int i = 0; i < calls; ++i) step = run_training_step(model, inputs, grad_outputs);
    outputs = std::move(step.outputs);
    grads = std::move(step.grads);
    timing << "forward " << step.forward_ms << " ms, backward " << step.backward_ms
           << " ms (training";
  } else {
    double ms = 0.0;
    for (int i = 0; i < calls; ++i) outputs = run_inference(model, inputs, &ms);
    timing << "forward " << ms << " ms (inference";
  }
  if (load.cuda_graphs) timing << ", CUDA graph: " << model.cuda_graph_report();
  timing << ")";

  for (size_t i = 0; i < inputs.size(); ++i) {
    std::cout << "input " << i << ": " << describe(inputs[i], true) << "\n";
  }
  const auto& named = model.signature().outputs;  // the stored names: ['logits'], [1], output
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::cout << "output " << i << " "
              << (i < named.size() ? named[i].name : positional_output_name(i)) << ": "
              << describe(outputs[i], true) << "\n";
    if (result.count("print") && outputs[i].defined()) {
      std::cout << outputs[i].detach().to(at::kCPU) << "\n";
    }
  }
  if (train) {
    std::cout << "gradients: " << grads.size() << " (";
    for (size_t i = 0; i < grads.size(); ++i) {
      std::cout << (i ? ", " : "") << grads[i].first;
      if (i == 3 && grads.size() > 5) {
        std::cout << ", ... " << grads.size() - 4 << " more";
        break;
      }
    }
    std::cout << ")\n";
  }
  std::cout << "time: " << timing.str() << "\n";

  if (result.count("outputs")) {
    save_tensor_list(result["outputs"].as<std::string>(), outputs);
    std::cout << "wrote " << result["outputs"].as<std::string>() << "\n";
  }
  if (result.count("grads")) {
    save_tensor_dict(result["grads"].as<std::string>(), grads);
    std::cout << "wrote " << result["grads"].as<std::string>() << "\n";
  }
  if (result.count("buffers")) {
    save_tensor_dict(result["buffers"].as<std::string>(), model.named_buffers());
    std::cout << "wrote " << result["buffers"].as<std::string>() << "\n";
  }
  return kExitOk;
}

}  // namespace pt2rt::cli
