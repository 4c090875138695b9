// distributed/data_parallel.cpp — DataParallel (pt2rt/distributed.h): DDP's broadcasts and a
// bucketed gradient all-reduce over a pt2rt::ProcessGroup.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <chrono>
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

}  // namespace

DataParallel::DataParallel(Model& model, ProcessGroup& group, DataParallelOptions options)
    : model_(model), group_(group), options_(options) {
  if (!model.device().is_cpu()) {
    std::ostringstream d;
    d << model.device();
    throw InputError("DataParallel: the model is on " + d.str() +
                     "; pt2rt's Gloo process group all-reduces CPU tensors (load it on cpu)");
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

  if (group_.size() > 1) {  // every parameter (frozen ones too) and buffer from rank 0
    std::vector<at::Tensor> state = model.parameters();
    for (const at::Tensor& b : buffer_tensors(model)) state.push_back(b);
    flat_collective(state, [&](std::vector<at::Tensor>& flats) {
      group_.broadcast(flats, 0, "initial broadcast of parameters and buffers");
    });
  }
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
  const auto start = std::chrono::steady_clock::now();
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> flats;
  flats.reserve(buckets_.size());
  for (const std::vector<size_t>& bucket : buckets_) {
    std::vector<at::Tensor> pieces;
    for (size_t i : bucket) {
      const at::Tensor& p = params_[i];
      const at::Tensor& g = p.grad();
      pieces.push_back(g.defined() ? g.reshape({-1}) : at::zeros({p.numel()}, p.options()));
    }
    flats.push_back(at::cat(pieces));
  }
  group_.all_reduce_sum(flats, "gradient all-reduce");
  const double scale = 1.0 / group_.size();
  for (size_t k = 0; k < buckets_.size(); ++k) {
    flats[k].mul_(scale);
    int64_t offset = 0;
    for (size_t i : buckets_[k]) {
      at::Tensor& p = params_[i];
      at::Tensor mean = flats[k].slice(0, offset, offset + p.numel()).view(p.sizes());
      offset += p.numel();
      if (p.grad().defined()) p.mutable_grad().copy_(mean);
      else p.mutable_grad() = mean.clone();
    }
  }
  all_reduce_s_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace pt2rt::distributed
