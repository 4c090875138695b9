// distributed/data_parallel.cpp — DataParallel (pt2rt/distributed.h): DDP's broadcasts and a
// bucketed gradient all-reduce over a pt2rt::ProcessGroup, launched from post hooks on the
// parameters' gradient accumulators (AccumulateGrad nodes) as c10d's Reducer does
// (torch/csrc/distributed/c10d/reducer.cpp: autograd_hook, mark_variable_ready).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <exception>
#include <map>
#include <sstream>

#include "pt2rt/distributed.h"

namespace pt2rt::distributed {
namespace {

/// Flattens same-dtype tensors into one contiguous buffer per dtype, runs `collective` on the
/// buffers, and copies the results back into the tensors (in place, under no_grad).
template <typename Collective>
void flat_collective(const std::vector<at::Tensor>& tensors, Collective&& collective) {
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.numel() > 0) by_dtype[t.scalar_type()].push_back(t);
  }
  if (by_dtype.empty()) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> flats;
  for (auto& [dtype, group] : by_dtype) {
    std::vector<at::Tensor> pieces;
    for (const at::Tensor& t : group) pieces.push_back(t.detach().reshape({-1}));
    flats.push_back(at::cat(pieces));
  }
  collective(flats);
  size_t k = 0;
  for (auto& [dtype, group] : by_dtype) {
    int64_t offset = 0;
    for (const at::Tensor& t : group) {
      t.detach().copy_(flats[k].slice(0, offset, offset + t.numel()).view(t.sizes()));
      offset += t.numel();
    }
    ++k;
  }
}

std::vector<at::Tensor> buffer_tensors(const Model& model) {
  std::vector<at::Tensor> out;
  for (const auto& [name, b] : model.named_buffers()) out.push_back(b);
  return out;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

/// The hooks (kept for the DataParallel's lifetime) and the state of the current step's
/// buckets: which gradients are ready, which buckets are launched (in bucket order, the same
/// on every rank, as the Reducer's next_bucket_).
struct DataParallel::Round {
  /// The owning pointer type of autograd nodes: std::shared_ptr (1.13) or c10::intrusive_ptr
  /// (2.x); holding it keeps the parameter's AccumulateGrad node (only weakly referenced by
  /// the parameter) and its hook alive.
  using NodePtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<at::Tensor>()));
  std::vector<NodePtr> accumulators;  ///< per trainable parameter
  std::vector<uintptr_t> hook_keys;   ///< per accumulator, for del_post_hook
  std::vector<size_t> bucket_of;      ///< trainable parameter -> bucket
  std::vector<char> ready;            ///< per trainable parameter, this step
  std::vector<size_t> unready;        ///< per bucket: gradients not ready yet
  std::vector<at::Tensor> flats;      ///< per bucket: the launched flat buffer
  size_t next = 0;                    ///< the next bucket to launch
  bool stale = false;                 ///< a gradient changed after its bucket was launched
  std::exception_ptr error;           ///< a launch from a hook failed
};

DataParallel::DataParallel(Model& model, ProcessGroup& group, DataParallelOptions options)
    : model_(model), group_(group), options_(options) {
  if (!model.device().is_cpu() && !model.device().is_cuda()) {
    std::ostringstream d;
    d << model.device();
    throw InputError("DataParallel: the model is on " + d.str() +
                     "; pt2rt's Gloo process group all-reduces CPU and CUDA tensors");
  }
  const c10::Device m = model.device();
  if (group.backend() == Backend::Nccl &&
      (!m.is_cuda() || (m.has_index() && m.index() != group.device().index()))) {
    throw InputError("DataParallel: the model is on " + m.str() + ", the NCCL process group on " +
                     group.device().str() + ": NCCL reduces this rank's GPU's tensors (move "
                     "the model there, or use Gloo)");
  }
  for (const at::Tensor& p : model.parameters()) {
    if (p.requires_grad()) params_.push_back(p);
  }
  // Buckets in reverse parameter order (the order backward produces gradients, as DDP's
  // Reducer), each at most bucket_bytes (a larger parameter gets a bucket of its own) and of
  // one dtype.
  std::vector<size_t> current;
  int64_t bytes = 0;
  for (size_t i = params_.size(); i-- > 0;) {
    const at::Tensor& p = params_[i];
    const int64_t b = p.numel() * static_cast<int64_t>(p.element_size());
    if (!current.empty() && (bytes + b > options_.bucket_bytes ||
                             params_[current.front()].scalar_type() != p.scalar_type())) {
      buckets_.push_back(std::move(current));
      current.clear();
      bytes = 0;
    }
    current.push_back(i);
    bytes += b;
  }
  if (!current.empty()) buckets_.push_back(std::move(current));
  round_ = std::make_unique<Round>();
  round_->bucket_of.resize(params_.size());
  for (size_t k = 0; k < buckets_.size(); ++k) {
    for (size_t i : buckets_[k]) round_->bucket_of[i] = k;
  }
  reset_round();

  if (group_.size() > 1) {  // every parameter (frozen ones too) and buffer from rank 0
    std::vector<at::Tensor> state = model.parameters();
    for (const at::Tensor& b : buffer_tensors(model)) state.push_back(b);
    flat_collective(state, [&](std::vector<at::Tensor>& flats) {
      group_.broadcast(flats, 0, "initial broadcast of parameters and buffers");
    });
  }
  if (group_.size() > 1 && options_.overlap) {
    // The engine runs a node's post hooks right after the node: for AccumulateGrad, once the
    // gradient is in .grad (LibTorch 1.13 and 2.x: Node::add_post_hook, as the Reducer).
    for (size_t i = 0; i < params_.size(); ++i) {
      Round::NodePtr acc = torch::autograd::impl::grad_accumulator(params_[i]);
      round_->hook_keys.push_back(
          acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
              [this, i](const torch::autograd::variable_list& outputs,
                        const torch::autograd::variable_list& /*inputs*/) {
                on_gradient_ready(i);
                return outputs;
              })));
      round_->accumulators.push_back(std::move(acc));
    }
  }
}

DataParallel::~DataParallel() {
  for (size_t i = 0; i < round_->accumulators.size(); ++i) {
    round_->accumulators[i]->del_post_hook(round_->hook_keys[i]);
  }
  if (round_->next > 0) {
    try {
      group_.wait_started("gradient all-reduce (abandoned)");
    } catch (const std::exception&) {  // a destructor does not throw; the step is abandoned
    }
  }
}

void DataParallel::reset_round() {
  Round& r = *round_;
  r.ready.assign(params_.size(), 0);
  r.unready.resize(buckets_.size());
  for (size_t k = 0; k < buckets_.size(); ++k) r.unready[k] = buckets_[k].size();
  r.flats.assign(buckets_.size(), at::Tensor());
  r.next = 0;
  r.stale = false;
  r.error = nullptr;
}

void DataParallel::launch(size_t bucket) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> pieces;
  for (size_t i : buckets_[bucket]) {
    const at::Tensor& p = params_[i];
    const at::Tensor& g = p.grad();
    pieces.push_back(g.defined() ? g.detach().reshape({-1})
                                 : at::zeros({p.numel()}, p.options()));
  }
  round_->flats[bucket] = at::cat(pieces);
  group_.start_all_reduce_sum(round_->flats[bucket], "gradient all-reduce");
}

void DataParallel::on_gradient_ready(size_t param) {
  Round& r = *round_;
  if (!sync_ || r.stale || r.error) return;
  if (r.ready[param]) {  // a second backward before average_gradients(): relaunch all then
    r.stale = true;
    return;
  }
  const auto start = Clock::now();
  r.ready[param] = 1;
  --r.unready[r.bucket_of[param]];
  try {
    while (r.next < buckets_.size() && r.unready[r.next] == 0) {
      launch(r.next++);
      ++overlapped_buckets_;
    }
  } catch (...) {  // not thrown through the autograd engine: average_gradients() rethrows
    r.error = std::current_exception();
  }
  launch_s_ += seconds_since(start);
}

void DataParallel::broadcast_buffers() {
  if (group_.size() == 1) return;
  flat_collective(buffer_tensors(model_), [&](std::vector<at::Tensor>& flats) {
    group_.broadcast(flats, 0, "broadcast of buffers");
  });
}

std::vector<at::Tensor> DataParallel::forward(const std::vector<at::Tensor>& inputs) {
  if (options_.broadcast_buffers && model_.is_training()) broadcast_buffers();
  return model_.forward(inputs);
}

void DataParallel::average_gradients() {
  if (group_.size() == 1) return;
  const auto start = Clock::now();
  Round& r = *round_;
  try {
    if (r.error) std::rethrow_exception(r.error);
    if (r.stale) {  // launched buckets hold outdated gradients: wait them, start again
      group_.wait_started("gradient all-reduce");
      reset_round();
    }
    while (r.next < buckets_.size()) launch(r.next++);
    group_.wait_started("gradient all-reduce");
  } catch (...) {
    reset_round();
    throw;
  }
  at::NoGradGuard no_grad;
  const double scale = 1.0 / group_.size();
  for (size_t k = 0; k < buckets_.size(); ++k) {
    r.flats[k].mul_(scale);
    int64_t offset = 0;
    for (size_t i : buckets_[k]) {
      at::Tensor& p = params_[i];
      at::Tensor mean = r.flats[k].slice(0, offset, offset + p.numel()).view(p.sizes());
      offset += p.numel();
      if (p.grad().defined()) p.mutable_grad().copy_(mean);
      else p.mutable_grad() = mean.clone();
    }
  }
  reset_round();
  all_reduce_s_ += seconds_since(start);
}

}  // namespace pt2rt::distributed
