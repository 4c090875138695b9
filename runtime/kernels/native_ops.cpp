// runtime/kernels/native_ops.cpp — see native_ops.h.
#include "kernels/native_ops.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <cmath>
#include <unordered_map>

#include "kernels/attention_ops.h"
#include "kernels/ctc_ops.h"
#include "kernels/rnn_ops.h"

namespace pt2rt {
namespace {

using torch::jit::Stack;

// aten::_assert_async(Tensor self[, str assert_msg]): raises unless `self` (one element) is
// non-zero. Run here as a host-side check (Tensor::is_nonzero copies the element to the host),
// never as ATen's kernel: on CUDA that is a device-side assert, which ends the process's CUDA
// context — an archive must not be able to do that. On the meta device (the load-time check)
// there is no value to test.
template <bool WithMessage>
void assert_async(Stack& s) {
  std::string msg = "assertion failed (aten::_assert_async)";
  if (WithMessage) {
    msg = s.back().toStringRef();
    s.pop_back();
  }
  at::Tensor t = s.back().toTensor();
  s.pop_back();
  if (t.is_meta()) return;
  TORCH_CHECK(t.numel() == 1, "aten::_assert_async: expected a one-element tensor, got ",
              t.numel(), " elements");
  TORCH_CHECK(t.is_nonzero(), msg);
}

void getitem(Stack& s) {
  int64_t idx = s.back().toInt();
  s.pop_back();
  c10::IValue list = std::move(s.back());
  s.pop_back();
  if (list.isTensorList()) {
    auto l = list.toTensorList();
    int64_t n = static_cast<int64_t>(l.size());
    TORCH_CHECK(idx >= -n && idx < n, "prim::getitem: index ", idx, " out of range for a list of ",
                n, " tensors");
    s.emplace_back(l.get(idx < 0 ? idx + n : idx));
    return;
  }
  auto l = list.toListRef();
  int64_t n = static_cast<int64_t>(l.size());
  TORCH_CHECK(idx >= -n && idx < n, "prim::getitem: index ", idx, " out of range for a list of ",
              n, " items");
  s.push_back(l[idx < 0 ? idx + n : idx]);
}

template <int64_t (*F)(const at::Tensor&, int64_t)>
void tensor_dim_query(Stack& s) {
  int64_t dim = s.back().toInt();
  s.pop_back();
  at::Tensor t = s.back().toTensor();
  s.pop_back();
  s.emplace_back(F(t, dim));
}
int64_t size_of(const at::Tensor& t, int64_t d) { return t.size(d); }
int64_t stride_of(const at::Tensor& t, int64_t d) { return t.stride(d); }

template <int64_t (*F)(const at::Tensor&)>
void tensor_query(Stack& s) {
  at::Tensor t = s.back().toTensor();
  s.pop_back();
  s.emplace_back(F(t));
}
int64_t numel_of(const at::Tensor& t) { return t.numel(); }
int64_t offset_of(const at::Tensor& t) { return t.storage_offset(); }
int64_t dim_of(const at::Tensor& t) { return t.dim(); }

// Python semantics on int64 — floor division and modulo take the divisor's sign — with every
// overflow reported instead of wrapping or trapping: a SymInt is archive data, and
// INT64_MIN // -1 or INT64_MIN % -1 raise SIGFPE on x86. Errors are c10::Errors, which the
// interpreter wraps into ExecutionError naming the node.
void check_overflow(bool overflow, const char* op, int64_t a, int64_t b) {
  TORCH_CHECK(!overflow, "sym::", op, "(", a, ", ", b, ") overflows int64");
}
int64_t py_floordiv(int64_t a, int64_t b) {
  TORCH_CHECK(b != 0, "sym::floordiv: division by zero");
  TORCH_CHECK(!(a == INT64_MIN && b == -1), "sym::floordiv(", a, ", ", b, ") overflows int64");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) {
  TORCH_CHECK(b != 0, "sym::mod: modulo by zero");
  if (b == -1) return 0;  // a % -1 is 0 for every a; INT64_MIN % -1 would trap
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

enum class Arith { Add, Sub, Mul, FloorDiv, Mod, TrueDiv, Max, Min };

template <Arith A>
void arith(Stack& s) {
  c10::IValue b = std::move(s.back());
  s.pop_back();
  c10::IValue a = std::move(s.back());
  s.pop_back();
  if (a.isInt() && b.isInt() && A != Arith::TrueDiv) {
    int64_t x = a.toInt(), y = b.toInt(), r = 0;
    switch (A) {
      case Arith::Add: check_overflow(__builtin_add_overflow(x, y, &r), "add", x, y); break;
      case Arith::Sub: check_overflow(__builtin_sub_overflow(x, y, &r), "sub", x, y); break;
      case Arith::Mul: check_overflow(__builtin_mul_overflow(x, y, &r), "mul", x, y); break;
      case Arith::FloorDiv: r = py_floordiv(x, y); break;
      case Arith::Mod: r = py_mod(x, y); break;
      case Arith::Max: r = std::max(x, y); break;
      case Arith::Min: r = std::min(x, y); break;
      default: break;
    }
    s.emplace_back(r);
    return;
  }
  double x = a.toScalar().toDouble(), y = b.toScalar().toDouble(), r = 0;
  // Python raises ZeroDivisionError for float // 0, float % 0 and / 0.
  if (A == Arith::FloorDiv || A == Arith::Mod || A == Arith::TrueDiv) {
    TORCH_CHECK(y != 0, "sym: division by zero");
  }
  switch (A) {
    case Arith::Add: r = x + y; break;
    case Arith::Sub: r = x - y; break;
    case Arith::Mul: r = x * y; break;
    case Arith::FloorDiv: r = std::floor(x / y); break;
    case Arith::Mod: r = x - std::floor(x / y) * y; break;
    case Arith::TrueDiv: r = x / y; break;
    case Arith::Max: r = std::max(x, y); break;
    case Arith::Min: r = std::min(x, y); break;
  }
  s.emplace_back(r);
}

void neg(Stack& s) {
  c10::IValue a = std::move(s.back());
  s.pop_back();
  if (a.isInt()) {
    TORCH_CHECK(a.toInt() != INT64_MIN, "sym::neg(", a.toInt(), ") overflows int64");
    s.emplace_back(-a.toInt());
  } else {
    s.emplace_back(-a.toScalar().toDouble());
  }
}

enum class Cmp { Eq, Ne, Lt, Le, Gt, Ge };

template <Cmp C>
void compare(Stack& s) {
  c10::IValue b = std::move(s.back());
  s.pop_back();
  c10::IValue a = std::move(s.back());
  s.pop_back();
  bool r = false;
  auto cmp = [&](auto x, auto y) {
    switch (C) {
      case Cmp::Eq: return x == y;
      case Cmp::Ne: return x != y;
      case Cmp::Lt: return x < y;
      case Cmp::Le: return x <= y;
      case Cmp::Gt: return x > y;
      case Cmp::Ge: return x >= y;
    }
    return false;
  };
  if (a.isInt() && b.isInt()) r = cmp(a.toInt(), b.toInt());
  else r = cmp(a.toScalar().toDouble(), b.toScalar().toDouble());
  s.emplace_back(r);
}

void logical_not(Stack& s) {
  bool a = s.back().toBool();
  s.pop_back();
  s.emplace_back(!a);
}

using Registry = std::unordered_map<std::string, NativeOp>;

Registry make_registry() {
  Registry r;
  auto add = [&r](const std::string& schema, NativeKernel k) {
    c10::FunctionSchema fs = torch::jit::parseSchema(schema);
    std::string key = fs.name() + "." + fs.overload_name();
    r.emplace(key, NativeOp{std::move(fs), k});
  };
  add("prim::getitem(Tensor[] list, int idx) -> Tensor", &getitem);
  add("aten::_assert_async(Tensor self) -> ()", &assert_async<false>);
  add("aten::_assert_async.msg(Tensor self, str assert_msg) -> ()", &assert_async<true>);
  for (const char* ns : {"sym::", "aten::sym_"}) {
    std::string p = ns;
    add(p + "size(Tensor self, int dim) -> int", &tensor_dim_query<&size_of>);
    add(p + "stride(Tensor self, int dim) -> int", &tensor_dim_query<&stride_of>);
    add(p + "numel(Tensor self) -> int", &tensor_query<&numel_of>);
    add(p + "storage_offset(Tensor self) -> int", &tensor_query<&offset_of>);
  }
  add("sym::dim(Tensor self) -> int", &tensor_query<&dim_of>);
  add("sym::add(Scalar a, Scalar b) -> Scalar", &arith<Arith::Add>);
  add("sym::sub(Scalar a, Scalar b) -> Scalar", &arith<Arith::Sub>);
  add("sym::mul(Scalar a, Scalar b) -> Scalar", &arith<Arith::Mul>);
  add("sym::floordiv(Scalar a, Scalar b) -> Scalar", &arith<Arith::FloorDiv>);
  add("sym::mod(Scalar a, Scalar b) -> Scalar", &arith<Arith::Mod>);
  add("sym::truediv(Scalar a, Scalar b) -> Scalar", &arith<Arith::TrueDiv>);
  add("sym::max(Scalar a, Scalar b) -> Scalar", &arith<Arith::Max>);
  add("sym::min(Scalar a, Scalar b) -> Scalar", &arith<Arith::Min>);
  add("sym::neg(Scalar a) -> Scalar", &neg);
  add("sym::eq(Scalar a, Scalar b) -> bool", &compare<Cmp::Eq>);
  add("sym::ne(Scalar a, Scalar b) -> bool", &compare<Cmp::Ne>);
  add("sym::lt(Scalar a, Scalar b) -> bool", &compare<Cmp::Lt>);
  add("sym::le(Scalar a, Scalar b) -> bool", &compare<Cmp::Le>);
  add("sym::gt(Scalar a, Scalar b) -> bool", &compare<Cmp::Gt>);
  add("sym::ge(Scalar a, Scalar b) -> bool", &compare<Cmp::Ge>);
  add("sym::sym_not(bool a) -> bool", &logical_not);
  add(kLstmSchema, &lstm_kernel);
  add(kLstmBackwardSchema, &lstm_backward_kernel);
  add(kGruSchema, &gru_kernel);
  add(kGruBackwardSchema, &gru_backward_kernel);
  add(kRnnTanhSchema, &rnn_tanh_kernel);
  add(kRnnTanhBackwardSchema, &rnn_tanh_backward_kernel);
  add(kRnnReluSchema, &rnn_relu_kernel);
  add(kRnnReluBackwardSchema, &rnn_relu_backward_kernel);
  add(kCtcLossSchema, &ctc_loss_kernel);
  add(kCtcLossBackwardSchema, &ctc_loss_backward_kernel);
  add(kAttentionSchema, &attention_kernel);
  add(kAttentionBackwardSchema, &attention_backward_kernel);
  return r;
}

}  // namespace

const NativeOp* find_native_op(const std::string& name, const std::string& overload) {
  static const Registry registry = make_registry();
  auto it = registry.find(name + "." + overload);
  return it == registry.end() ? nullptr : &it->second;
}

bool cpu_float32(const at::Tensor& t, int64_t dim) {
  return t.is_cpu() && t.layout() == c10::kStrided && t.scalar_type() == at::kFloat &&
         t.dim() == dim;
}

}  // namespace pt2rt
