// runtime/core/autograd_compat.h — the one place where LibTorch 1.13 and 2.x
// autograd internals differ for pt2rt: how autograd nodes are owned. 1.13 holds a
// torch::autograd::Node in a std::shared_ptr (Edge::function), 2.x in a c10::intrusive_ptr (Node
// derives from c10::intrusive_ptr_target).
#pragma once

#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>

#include <memory>
#include <type_traits>
#include <utility>

namespace pt2rt {

/// The owning pointer type of autograd nodes in the running LibTorch.
using NodePtr = decltype(torch::autograd::Edge::function);

/// Creates node T (a torch::autograd::Node) owned the way Edge::function owns nodes.
template <class T, class... Args>
NodePtr make_node(Args&&... args) {
  if constexpr (std::is_same_v<NodePtr, std::shared_ptr<torch::autograd::Node>>) {
    return std::make_shared<T>(std::forward<Args>(args)...);
  } else {
    return c10::make_intrusive<T>(std::forward<Args>(args)...);
  }
}

}  // namespace pt2rt
