// runtime/core/node_observer.cpp — the process-wide observer slot of pt2rt/node_observer.h (the
// interpreter reads it once per plan segment: interpreter.cpp).
#include "pt2rt/node_observer.h"

#include <atomic>

namespace pt2rt {
namespace {

// Acquire/release: a thread that sees the pointer also sees the observer's construction
// (on x86 both are plain moves, like a relaxed access).
std::atomic<NodeObserver*> g_observer{nullptr};

}  // namespace

ScopedNodeObserver::ScopedNodeObserver(NodeObserver& observer)
    : previous_(g_observer.exchange(&observer, std::memory_order_acq_rel)) {}

ScopedNodeObserver::~ScopedNodeObserver() { g_observer.store(previous_, std::memory_order_release); }

NodeObserver* installed_node_observer() { return g_observer.load(std::memory_order_acquire); }

}  // namespace pt2rt
