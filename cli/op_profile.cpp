// cli/op_profile.cpp — RecordFunction observers that time outermost operator calls.
#include "op_profile.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>

namespace pt2rt::cli {
namespace {

std::mutex g_mutex;
std::map<std::string, OpRow>* g_rows = nullptr;  // guarded by g_mutex; set while profiling
thread_local int t_depth = 0;

struct Start : at::ObserverContext {
  std::chrono::steady_clock::time_point time;
  bool op = false;         ///< a dispatcher operator (not autograd's evaluate_function ranges)
  bool outermost = false;
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  auto ctx = std::make_unique<Start>();
  ctx->op = fn.operator_name().has_value();
  if (!ctx->op) return ctx;  // autograd's ranges: the ops inside them are the rows
  ctx->outermost = t_depth++ == 0;
  ctx->time = std::chrono::steady_clock::now();
  return ctx;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* ctx_base) {
  const auto now = std::chrono::steady_clock::now();
  auto* ctx = static_cast<Start*>(ctx_base);
  if (ctx == nullptr || !ctx->op) return;
  --t_depth;
  if (!ctx->outermost) return;
  const auto op = fn.operator_name();
  const std::string name = op->name + (op->overload_name.empty() ? "" : "." + op->overload_name);
  const double us = std::chrono::duration<double, std::micro>(now - ctx->time).count();
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_rows == nullptr) return;
  OpRow& row = (*g_rows)[name];
  row.op = name;
  row.calls += 1;
  row.total_us += us;
}

}  // namespace

OpProfile::OpProfile() {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_rows = new std::map<std::string, OpRow>();
  }
  handle_ = at::addGlobalCallback(
      at::RecordFunctionCallback(on_start, on_end).scopes({at::RecordScope::FUNCTION}));
}

OpProfile::~OpProfile() {
  at::removeCallback(handle_);
  std::lock_guard<std::mutex> lock(g_mutex);
  delete g_rows;
  g_rows = nullptr;
}

std::vector<OpRow> OpProfile::rows() const {
  std::vector<OpRow> out;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (const auto& [name, row] : *g_rows) out.push_back(row);
  }
  std::sort(out.begin(), out.end(),
            [](const OpRow& a, const OpRow& b) { return a.total_us > b.total_us; });
  return out;
}

void OpProfile::reset() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_rows->clear();
}

}  // namespace pt2rt::cli
