// distributed/c10d_compat.h — the c10d headers pt2rt_distributed uses, on LibTorch 1.13 and 2.x.
//
// ProcessGroupGloo.hpp compiles only with USE_C10D_GLOO defined (distributed/CMakeLists.txt)
// and includes <gloo/...> (Debian: libgloo-dev). The calls pt2rt makes are spelled the same on
// both versions: on 1.13 ProcessGroupGloo is a c10d::ProcessGroup, on 2.x a c10d::Backend
// (ProcessGroup became a dispatcher over backends); both have allreduce/broadcast/barrier with
// the same signatures, Options::create(timeout) and the `devices` list, and
// createDeviceForHostname/createDefaultDevice (2.x adds a defaulted lazyInit argument).
// TCPStoreOptions::useLibUV (2.x only) defaults to true, but Debian's LibTorch is built without
// libuv ("use_libuv was requested but PyTorch was built without libuv support"):
// tcp_store_without_libuv() turns it off where the field exists. compat::Backend is the class
// both ProcessGroupGloo and (2.x, CUDA builds) ProcessGroupNCCL derive from.
#pragma once

#include <torch/version.h>

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace pt2rt::distributed::compat {

#if TORCH_VERSION_MAJOR >= 2
using Backend = c10d::Backend;
#else
using Backend = c10d::ProcessGroup;
#endif

template <typename Options>
auto tcp_store_without_libuv(Options& o, int) -> decltype(o.useLibUV = false, void()) {
  o.useLibUV = false;
}
template <typename Options>
void tcp_store_without_libuv(Options&, long) {}  // LibTorch 1.13: no libuv server

}  // namespace pt2rt::distributed::compat
