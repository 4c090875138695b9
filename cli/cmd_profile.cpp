// export-cli profile — where the time of a pt2rt call goes, per graph node and per operator
// (the ETDump / Inspector analogue; pt2rt/node_observer.h times the nodes).
//
//   export-cli profile <model.pt2> [--train] [--iters N] [--warmup W] [--inputs in.pt]
//                      [--device cpu|cuda] [--top K] [--json] [--inference-only] [--onednn-benchmark]
//
// Runs W untimed calls, then N calls (inference, or with --train the training forward and
// the backward with ones as cotangents) while a NodeProfile observes every node the plans
// run. Node rows: graph, node, op overload, declared output shape/dtype, calls, total and mean
// time, share of the measured call time (the wall time of the N calls). Operator rows are the
// node rows summed per op overload. The header line gives the median call, the median
// interpreted time (the plan segments' spans, in which the nodes ran) and the nodes' share of
// it; the rest of a call is binding, autograd and handing outputs out. The table shows the
// top K rows of each (--top 0: all); a `*` after the graph marks a node of the cached
// weight-only prologue (it runs when a weight changed, e.g. in the first call). On CUDA each
// call ends with a device synchronization (torch::cuda::synchronize), so a call's time is
// the device's work; node rows are the kernels' launch times there.
//
// --json prints {"model", "mode", "iters", "warmup", "measured_us", "interpreted_us",
// "nodes_us", "per_call": [{"wall_us", "interpreted_us", "nodes_us"}], "plans": [{"graph",
// "nodes_per_call"}], "nodes": [{"graph", "node", "position", "name", "op", "outputs",
// "prologue", "calls", "total_us", "mean_us", "share"}], "ops": [{"op", "nodes", "calls",
// "total_us", "mean_us", "share"}]} with every row.
#include <algorithm>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include <torch/cuda.h>

#include "cli.h"
#include "node_profile.h"
#include "options.h"
#include "pt2rt/model.h"
#include "steps.h"
#include "tensor_io.h"
#include "terminal.h"

namespace pt2rt::cli {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/// `text` cut to `width` columns ("..." at the end when cut), terminal-safe.
std::string cell(const std::string& text, size_t width) {
  std::string s = terminal_safe(text);
  return s.size() <= width ? s : s.substr(0, width - 3) + "...";
}

/// A column's width: its widest shown cell (terminal-safe) plus a space, at least `header`
/// wide and at most `limit` (longer cells are cut with "...").
template <typename Row, typename Get>
size_t column_width(const std::vector<Row>& rows, size_t shown, Get get, size_t header,
                    size_t limit = 64) {
  size_t w = header;
  for (size_t i = 0; i < shown && i < rows.size(); ++i) {
    w = std::max(w, terminal_safe(get(rows[i])).size() + 1);
  }
  return std::min(w, limit);
}

void print_json(const std::string& path, bool train, int iters, int warmup,
                const std::vector<CallTimes>& calls, const NodeProfile& profile) {
  double wall = 0.0, interpreted = 0.0, nodes = 0.0;
  nlohmann::ordered_json j, per_call = nlohmann::ordered_json::array();
  for (const CallTimes& c : calls) {
    wall += c.wall_us, interpreted += c.interpreted_us, nodes += c.nodes_us;
    per_call.push_back(
        {{"wall_us", c.wall_us}, {"interpreted_us", c.interpreted_us}, {"nodes_us", c.nodes_us}});
  }
  const auto share = [&](double us) { return wall > 0 ? us / wall : 0.0; };
  j["model"] = path;
  j["mode"] = train ? "train" : "inference";
  j["iters"] = iters;
  j["warmup"] = warmup;
  j["measured_us"] = wall;
  j["interpreted_us"] = interpreted;
  j["nodes_us"] = nodes;
  j["per_call"] = per_call;
  j["plans"] = nlohmann::ordered_json::array();
  for (const PlanNodes& p : profile.plans()) {
    j["plans"].push_back({{"graph", to_string(p.graph)}, {"nodes_per_call", p.nodes}});
  }
  j["nodes"] = nlohmann::ordered_json::array();
  for (const NodeRow& r : profile.node_rows()) {
    j["nodes"].push_back({{"graph", to_string(r.graph)}, {"node", r.node},
                          {"position", r.position}, {"name", r.name}, {"op", r.op},
                          {"outputs", r.outputs}, {"prologue", r.prologue},
                          {"calls", r.calls}, {"total_us", r.total_us},
                          {"mean_us", r.total_us / static_cast<double>(r.calls)},
                          {"share", share(r.total_us)}});
  }
  j["ops"] = nlohmann::ordered_json::array();
  for (const OpRow& r : profile.op_rows()) {
    j["ops"].push_back({{"op", r.op}, {"nodes", r.nodes}, {"calls", r.calls},
                        {"total_us", r.total_us},
                        {"mean_us", r.total_us / static_cast<double>(r.calls)},
                        {"share", share(r.total_us)}});
  }
  std::cout << j.dump(2, ' ', true, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

void print_table(const std::string& path, bool train, const std::vector<CallTimes>& calls,
                 const NodeProfile& profile, size_t top) {
  std::vector<double> wall, interpreted, nodes;
  double total_wall = 0.0;
  for (const CallTimes& c : calls) {
    wall.push_back(c.wall_us), interpreted.push_back(c.interpreted_us);
    nodes.push_back(c.nodes_us), total_wall += c.wall_us;
  }
  const double mi = median(interpreted);
  std::cout << terminal_safe(path) << ": " << (train ? "training forward + backward" : "inference")
            << ", " << calls.size() << " calls, median " << std::fixed << std::setprecision(3)
            << median(wall) / 1000.0 << " ms per call, interpreted " << mi / 1000.0
            << " ms, nodes " << std::setprecision(1) << (mi > 0 ? 100.0 * median(nodes) / mi : 0.0)
            << " % of it\n";
  const auto share = [&](double us) { return total_wall > 0 ? 100.0 * us / total_wall : 0.0; };
  const auto shown = [&](size_t n) { return top == 0 ? n : std::min(n, top); };

  const std::vector<NodeRow> node_rows = profile.node_rows();
  const size_t n_nodes = shown(node_rows.size());
  const size_t wn = column_width(node_rows, n_nodes, [](const NodeRow& r) { return r.name; }, 6);
  const size_t wo = column_width(node_rows, n_nodes, [](const NodeRow& r) { return r.op; }, 4);
  const size_t wr =
      column_width(node_rows, n_nodes, [](const NodeRow& r) { return r.outputs; }, 8);
  const auto w = [](size_t n) { return std::setw(static_cast<int>(n)); };
  std::cout << "\nnodes (" << n_nodes << " of " << node_rows.size() << ", by total time)\n"
            << std::left << std::setw(10) << "graph" << std::right << std::setw(5) << "node"
            << "  " << std::left << w(wn) << "name" << w(wo) << "op" << w(wr) << "output"
            << std::right << std::setw(7) << "calls" << std::setw(11) << "total ms"
            << std::setw(11) << "mean us" << std::setw(8) << "share" << "\n";
  bool any_prologue = false;
  for (size_t i = 0; i < n_nodes; ++i) {
    const NodeRow& r = node_rows[i];
    any_prologue = any_prologue || r.prologue;
    std::cout << std::left << std::setw(10)
              << (std::string(to_string(r.graph)) + (r.prologue ? "*" : "")) << std::right
              << std::setw(5) << r.node << "  " << std::left << w(wn) << cell(r.name, wn - 1)
              << w(wo) << cell(r.op, wo - 1) << w(wr) << cell(r.outputs, wr - 1) << std::right
              << std::setw(7) << r.calls << std::setw(11) << std::setprecision(3)
              << r.total_us / 1000.0 << std::setw(11) << std::setprecision(1)
              << r.total_us / static_cast<double>(r.calls) << std::setw(7) << share(r.total_us)
              << "%\n";
  }
  if (any_prologue) {
    std::cout << "* a weight-only node of the cached prologue: runs when a weight changed\n";
  }
  const std::vector<OpRow> op_rows = profile.op_rows();
  const size_t wop =
      column_width(op_rows, shown(op_rows.size()), [](const OpRow& r) { return r.op; }, 4, 96);
  std::cout << "\noperators (" << shown(op_rows.size()) << " of " << op_rows.size()
            << ", by total time)\n"
            << std::left << w(wop) << "op" << std::right << std::setw(7) << "nodes"
            << std::setw(8) << "calls" << std::setw(11) << "total ms" << std::setw(11)
            << "mean us" << std::setw(8) << "share" << "\n";
  for (size_t i = 0; i < shown(op_rows.size()); ++i) {
    const OpRow& r = op_rows[i];
    std::cout << std::left << w(wop) << cell(r.op, wop - 1) << std::right << std::setw(7)
              << r.nodes << std::setw(8) << r.calls << std::setw(11) << std::setprecision(3)
              << r.total_us / 1000.0 << std::setw(11) << std::setprecision(1)
              << r.total_us / static_cast<double>(r.calls) << std::setw(7) << share(r.total_us)
              << "%\n";
  }
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  cxxopts::Options options = model_options(
      "profile", "Time a pt2rt archive's calls per graph node and per operator.\n",
      "archive to profile");
  // clang-format off
  options.add_options()
      ("train", "profile the training forward and the backward (ones as cotangents)")
      ("iters", "timed calls", cxxopts::value<int>()->default_value("10"))
      ("warmup", "untimed calls first", cxxopts::value<int>()->default_value("2"))
      ("inputs", "torch.save file with the input tensors: a tuple/list, or a dict {input name: "
       "tensor} (default: the bundled example)",
       cxxopts::value<std::string>())
      ("device", "cpu or cuda[:index]", cxxopts::value<std::string>()->default_value("cpu"))
      ("top", "rows of each table (0: all)", cxxopts::value<int>()->default_value("20"))
      ("json", "print every row as one JSON object");
  // clang-format on
  add_deployment_options(options);
  add_load_options(options);
  const auto args = parse_model_options(options, argc, argv);
  if (!args) return kExitOk;
  const cxxopts::ParseResult& result = args->result;
  const std::string& path = args->path;
  const int iters = result["iters"].as<int>(), warmup = result["warmup"].as<int>();
  const int top = result["top"].as<int>();
  if (iters < 1) throw UsageError("--iters must be >= 1");
  if (warmup < 0) throw UsageError("--warmup must be >= 0");
  if (top < 0) throw UsageError("--top must be >= 0");
  const bool train = result.count("train") > 0;
  const c10::Device device = parse_device(result["device"].as<std::string>());
  std::vector<at::Tensor> inputs;
  LoadOptions load = load_options(result);
  apply_deployment_options(result, train, device, load);
  Model model = Model::load(path, device, load);
  if (result.count("inputs")) {
    inputs = load_inputs(result["inputs"].as<std::string>(), "--inputs", model.signature());
  } else {
    const std::vector<Example> examples = model.examples();
    if (examples.empty()) throw UsageError(path + " has no bundled example; give --inputs");
    for (const auto& t : examples[0].inputs) inputs.push_back(to_tensor(t));
  }
  inputs = to_device(inputs, device);
  if (train && !has_training_graphs(model.program())) {
    throw UsageError(path + " has no forward/backward graphs (exported without training)");
  }
  const NamedTensors buffers = snapshot_buffers(model);
  auto call = [&] {
    if (train) {
      run_training_step(model, inputs, {});
    } else {
      double ms = 0.0;
      run_inference(model, inputs, &ms);
    }
    // A call's time includes the device's work (kernel launches are asynchronous on CUDA);
    // the node rows stay launch times there.
    if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
  };
  NodeProfile profile;
  std::vector<CallTimes> calls;
  {
    ScopedNodeObserver observing(profile);
    for (int i = 0; i < warmup; ++i) call();
    profile.reset();
    for (int i = 0; i < iters; ++i) {
      profile.begin_call();
      const auto start = std::chrono::steady_clock::now();
      call();
      const auto stop = std::chrono::steady_clock::now();
      calls.push_back(
          profile.end_call(std::chrono::duration<double, std::micro>(stop - start).count()));
    }
  }
  restore_buffers(model, buffers);  // the training forwards updated BatchNorm statistics
  if (result.count("json")) print_json(path, train, iters, warmup, calls, profile);
  else print_table(path, train, calls, profile, static_cast<size_t>(top));
  return kExitOk;
}

}  // namespace pt2rt::cli
