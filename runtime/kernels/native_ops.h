// runtime/kernels/native_ops.h — FX targets that are not dispatcher ops, executed by
// pt2rt itself.
//
// The exporter names non-ATen FX targets in pt2rt's own namespaces (DESIGN.md "Program"):
//   prim::getitem(Tensor[] list, int idx) -> Tensor     element of a TensorList value
//   sym::size / sym::stride (Tensor self, int dim) -> int,
//   sym::numel / sym::storage_offset / sym::dim (Tensor self) -> int
//   sym::add, sub, mul, floordiv, mod, truediv, max, min (Scalar a, Scalar b) -> Scalar,
//   sym::neg (Scalar a) -> Scalar, sym::eq, ne, lt, le, gt, ge (Scalar a, Scalar b) -> bool,
//   sym::sym_not (bool a) -> bool
//   aten::_assert_async(Tensor self), aten::_assert_async.msg(Tensor self, str assert_msg) -> ()
//     (torch 2.x's data checks, e.g. F.one_hot's range check: a host-side check that raises
//     c10::Error with the message; ATen's own kernel is a device-side assert on CUDA, which
//     ends the CUDA context, so the operator policy refuses it as a dispatcher op)
//   pt2rt::lstm, pt2rt::lstm_backward: an nn.LSTM as one node (rnn_ops.h)
//   pt2rt::scaled_dot_product_attention(_backward): SDPA as one node (attention_ops.h)
// (Python's `operator.*` on SymInts, with Python semantics: floordiv rounds toward -inf,
// mod takes the divisor's sign). Integer arithmetic is checked: an overflow of int64
// (INT64_MIN // -1, a product past 2^63, -INT64_MIN) or a division by zero is a c10::Error,
// which the interpreter reports as ExecutionError — never a wrapped value or a SIGFPE. The aten spellings `aten::sym_size` etc. are accepted too.
//
// Each native op has a c10::FunctionSchema so its arguments are converted exactly like a
// dispatcher op's; its kernel consumes the arguments from the stack and pushes the returns,
// like a boxed kernel.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/stack.h>

#include <string>

namespace pt2rt {

using NativeKernel = void (*)(torch::jit::Stack& stack);

struct NativeOp {
  c10::FunctionSchema schema;
  NativeKernel kernel;
};

/// The native op named `name` + `overload` ("sym::add", ""), or nullptr when there is none.
/// The returned object lives for the whole process.
const NativeOp* find_native_op(const std::string& name, const std::string& overload);

/// Whether `t` is a strided float32 CPU tensor of `dim` dims (what the packed kernels of
/// kernels/conv_prepack.h / kernels/linear_prepack.h run on oneDNN; anything else takes their
/// ATen fallback).
bool cpu_float32(const at::Tensor& t, int64_t dim);

}  // namespace pt2rt
