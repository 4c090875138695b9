// runtime/exec/training_graphs.cpp — see training_graphs.h.
#include "exec/training_graphs.h"

#include <sstream>
#include <utility>

#include "pt2rt/errors.h"

namespace pt2rt {

TrainingGraphs::Ticket::~Ticket() {
  if (generation == 0 || !entry) return;
  uint64_t mine = generation;
  entry->pending.compare_exchange_strong(mine, 0);  // a later replay's wait stays
}

TrainingGraphs::TrainingGraphs(std::shared_ptr<GraphCapturer> capturer, size_t max_graphs)
    : capturer_(std::move(capturer)), max_graphs_(max_graphs) {}

TrainingGraphs::Result TrainingGraphs::forward(const void* plan_key,
                                               const std::vector<at::Tensor>& inputs,
                                               const Run& run, std::shared_ptr<Ticket>* ticket) {
  ticket->reset();
  std::lock_guard<std::mutex> lock(mu_);
  const size_t plan_id = plan_ids_.emplace(plan_key, plan_ids_.size() + 1).first->second;
  std::ostringstream key_text;
  key_text << "plan " << plan_id << " " << graph_key(inputs);
  const std::string key = key_text.str();
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= max_graphs_) return {run(inputs), false};
    it = entries_.emplace(key, std::make_shared<Entry>()).first;
  }
  const std::shared_ptr<Entry>& e = it->second;
  switch (next_step(*capturer_, e->forward_status, e->forward, kCudaGraphWarmupRuns, inputs,
                    run, nullptr, "the training forward for", key)) {
    case KeyStep::WarmUp:
      ticket->reset(new Ticket{e, 0});
      return {capturer_->warm_up(inputs, run), false};
    case KeyStep::Plain:
      return {run(inputs), false};
    case KeyStep::Replay:
      break;
  }
  // The saved activations of the last replay are still needed by its backward.
  if (e->pending.load() != 0) return {run(inputs), false};
  const std::vector<at::Tensor>& outputs = e->forward->replay(inputs);
  ++e->forward_status.replays;
  const uint64_t generation = ++e->generation;
  e->pending.store(generation);
  ticket->reset(new Ticket{e, generation});
  return {outputs, true};
}

void TrainingGraphs::check_current(const Ticket& ticket) const {
  std::lock_guard<std::mutex> lock(mu_);
  check_current_locked(ticket);
}

void TrainingGraphs::check_current_locked(const Ticket& ticket) {
  if (ticket.generation == 0 || ticket.entry->generation == ticket.generation) return;
  throw ExecutionError(
      "pt2rt: LoadOptions::cuda_graphs: this backward belongs to a training forward whose "
      "saved activations a later forward replay overwrote (a second backward with "
      "retain_graph after another forward); run the backward before the next forward, or "
      "load without cuda_graphs");
}

TrainingGraphs::Result TrainingGraphs::backward(const std::shared_ptr<Ticket>& ticket,
                                                const std::vector<at::Tensor>& grad_outputs,
                                                const Run& run) {
  if (!ticket) return {run(grad_outputs), false};
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = *ticket->entry;
  if (ticket->generation == 0) return {capturer_->warm_up(grad_outputs, run), false};
  check_current_locked(*ticket);
  const std::string key = graph_key(grad_outputs);
  Entry::Backward& b = e.backward[key];
  const bool replay = next_step(*capturer_, b.status, b.graph, /*warmups_due=*/0, grad_outputs,
                                run, e.forward.get(), "the training backward for grad-outputs",
                                key) == KeyStep::Replay;
  // Without its graph the backward reads the forward graph's saved activations.
  Result r = replay ? Result{b.graph->replay(grad_outputs), true} : Result{run(grad_outputs), false};
  if (replay) ++b.status.replays;
  uint64_t mine = ticket->generation;
  e.pending.compare_exchange_strong(mine, 0);
  return r;
}

std::vector<std::string> TrainingGraphs::report() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> lines;
  for (const auto& [key, e] : entries_) {
    std::string line = "train " + key + ": forward " + e->forward_status.describe();
    for (const auto& [bkey, b] : e->backward) {
      line += "; backward " + bkey + ": " + b.status.describe();
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace pt2rt
