"""Decompositions pt2rt applies while tracing: on torch 1.13 (``make_fx(decomposition_table=...)``)
for the joint graph, and on torch 2.x (``aot_export_joint_with_descriptors(decompositions=...)``)
for every graph (section at the end).

torch 1.13's ``aten::native_batch_norm`` updates ``running_mean`` / ``running_var`` inside the
kernel although its schema carries no alias annotation on them, so functionalization never sees
the mutation and the running-stat update would be lost from the captured graph. The entry below
re-expresses the training-mode call with explicit, visible in-place copies:

    out, save_mean, save_invstd = native_batch_norm(x, w, b, None, None, True, momentum, eps)
    running_mean.copy_(lerp(running_mean, save_mean, momentum))
    running_var.copy_(lerp(running_var, (save_invstd ** -2 - eps) * n / (n - 1), momentum))

which is what the CPU/CUDA kernels compute (batch_norm_cpu_update_stats_template: the running
variance takes the unbiased batch variance), from what ``native_batch_norm`` already returned:
its ``save_invstd`` is ``1 / sqrt(biased_var + eps)``, so the biased variance is
``save_invstd ** -2 - eps`` and the unbiased one that times ``n / (n - 1)`` (n = elements per
channel). Five small ops on [C] tensors per BatchNorm instead of a second full pass over the
input (``var``) and seven ops; the recovered variance differs from the kernel's by float32
rounding of ``save_invstd`` (a few 1e-7 relative). ``lerp(a, b, w) = a + w * (b - a)`` is the
momentum update. Functionalization then turns the copies into ``InputMutation`` outputs.
Decompositions run below autograd, so autograd still records the original
``native_batch_norm`` and the backward stays ``native_batch_norm_backward``. The C++ runtime
recognises the six ops by data flow and runs them as the kernel's own in-place update on
clones of the running statistics (runtime/plan/fuse_batch_norm_stats.h), which gives eager's bits.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Dict, Iterator

import torch

aten = torch.ops.aten


def running_stats_update(input, save_mean, save_invstd, running_mean, running_var, momentum,
                         eps):
    """(new running_mean, new running_var) of a training-mode BatchNorm, from the
    ``save_mean`` / ``save_invstd`` its ``native_batch_norm`` returned (module docstring).
    Falls back to a variance pass over ``input`` when the per-channel count is not a plain
    int above 1 (symbolic shapes; n == 1, where the unbiased variance is undefined)."""
    n = input.numel() // input.shape[1] if input.dim() > 1 else input.numel()
    new_mean = aten.lerp.Scalar(running_mean, save_mean, momentum)
    if isinstance(n, int) and n > 1:
        biased_var = aten.sub.Tensor(aten.pow.Tensor_Scalar(save_invstd, -2), eps)
        unbiased_var = aten.mul.Tensor(biased_var, n / (n - 1))
    else:
        dims = [0] + list(range(2, input.dim()))
        unbiased_var = aten.var.correction(input, dims, correction=1)
    return new_mean, aten.lerp.Scalar(running_var, unbiased_var, momentum)


def _native_batch_norm_visible_stats(input, weight, bias, running_mean, running_var, training,
                                     momentum, eps):
    if not training or running_mean is None or running_var is None:
        return NotImplemented  # no hidden mutation: trace the op itself
    out, save_mean, save_invstd = aten.native_batch_norm.default(
        input, weight, bias, None, None, True, momentum, eps)
    new_mean, new_var = running_stats_update(input, save_mean, save_invstd, running_mean,
                                             running_var, momentum, eps)
    aten.copy_.default(running_mean, new_mean)
    aten.copy_.default(running_var, new_var)
    return out, save_mean, save_invstd


def _prelu_backward_portable(grad_output, self, weight):
    """torch 1.13's ``prelu_backward`` (``Activation.cpp``: one weight shared by all channels,
    or one per channel on dim 1, dim 0 for a 1-D input) in ops LibTorch 2.x also has:
    ``grad_input = where(x > 0, g, w * g)``, ``grad_weight`` = the sum of ``where(x > 0, 0,
    x * g)`` over every dim but the channel's. LibTorch 2.x has no ``prelu_backward`` (its
    PReLU differentiates ``_prelu_kernel``), so a 1.13 PReLU archive could not train there.
    The sums run in another order than the kernel's: rounding differences only."""
    positive = self > 0
    ndim = self.dim()
    channel = 1 if ndim > 1 else 0
    if weight.numel() == 1:
        w = weight.reshape([1] * ndim)
        dims = list(range(ndim))
    else:
        w = weight.reshape([weight.numel() if d == channel else 1 for d in range(ndim)])
        dims = [d for d in range(ndim) if d != channel]
    scaled = grad_output * self
    grad_input = torch.where(positive, grad_output, w * grad_output)
    grad_weight = torch.where(positive, torch.zeros_like(scaled), scaled)
    if dims:
        grad_weight = grad_weight.sum(dims)
    return grad_input, grad_weight.reshape(weight.shape)


def training_decompositions() -> Dict[torch._ops.OpOverload, Callable]:
    """The decomposition table for the joint (training) trace."""
    table = {aten.native_batch_norm.default: _native_batch_norm_visible_stats}
    prelu_backward = getattr(aten, "prelu_backward", None)  # torch 1.13; gone in 2.x
    if prelu_backward is not None:
        table[prelu_backward.default] = _prelu_backward_portable
    return table


# ---------------------------------------------------------------------------
# torch >= 2 (capture_torch2): portable BatchNorm.
#
# AOTAutograd on torch 2.x functionalizes BatchNorm into ``_native_batch_norm_legit_functional``
# (training) and ``_native_batch_norm_legit_no_training`` (eval), ops LibTorch 1.13 does not
# have. Re-expressed with ``native_batch_norm`` (running stats passed as None in training, so
# the op mutates nothing) and the running-stat arithmetic above, a 2.x archive with BatchNorm
# runs on LibTorch 1.13 too. The backward is unaffected: decompositions run below autograd, so
# it stays ``native_batch_norm_backward`` on the same save_mean / save_invstd.

def _legit_functional(input, weight, bias, running_mean, running_var, training, momentum, eps):
    if not training:
        return NotImplemented
    out, save_mean, save_invstd = aten.native_batch_norm.default(
        input, weight, bias, None, None, True, momentum, eps)
    return (out, save_mean, save_invstd,
            *running_stats_update(input, save_mean, save_invstd, running_mean, running_var,
                                  momentum, eps))


def _legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps):
    return aten.native_batch_norm.default(input, weight, bias, running_mean, running_var, False,
                                          momentum, eps)


def _legit_no_stats(input, weight, bias, training, momentum, eps):
    return aten.native_batch_norm.default(input, weight, bias, None, None, training, momentum,
                                          eps)


# torch >= 2.3's ``_batch_norm_with_update`` / ``_batch_norm_no_update`` (what
# ``torch.export``'s pre-dispatch graphs call; ``torch.ops.aten`` users too) and their backward
# ``batch_norm_backward`` take the running statistics as plain tensor arguments; the runtime
# refuses a batch norm that gets them in training mode (LibTorch 1.13's overwrite them), and
# LibTorch 1.13 has none of the three. The same computation with ``native_batch_norm``: the
# update as above (new statistics returned, so functionalization makes them InputMutation
# outputs), eval mode with the statistics read, the backward as ``native_batch_norm_backward``
# on ``save_mean`` / ``save_invstd`` (training) or the running statistics (eval).

def _with_update_functional(input, weight, bias, running_mean, running_var, momentum, eps):
    out, save_mean, save_invstd = aten.native_batch_norm.default(
        input, weight, bias, None, None, True, momentum, eps)
    new_mean, new_var = running_stats_update(input, save_mean, save_invstd, running_mean,
                                             running_var, momentum, eps)
    reserve = aten.empty.memory_format([0], dtype=torch.uint8, device=input.device)
    return out, save_mean, save_invstd, reserve, new_mean, new_var


def _no_update(input, weight, bias, running_mean, running_var, momentum, eps):
    training = running_mean is None or running_var is None
    out, save_mean, save_invstd = aten.native_batch_norm.default(
        input, weight, bias, running_mean, running_var, training, momentum, eps)
    reserve = aten.empty.memory_format([0], dtype=torch.uint8, device=input.device)
    return out, save_mean, save_invstd, reserve


def _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                         save_var, update, eps, output_mask, reserve):
    train = update or running_mean is None or running_var is None
    return aten.native_batch_norm_backward.default(
        grad_out, input, weight, None if train else running_mean,
        None if train else running_var, save_mean, save_var, train, eps, output_mask)


# torch 2.x's decompositions of upsampling and other gathers (torch._decomp) emit
# ``aten::_unsafe_index`` / ``aten::_unsafe_index_put``: the same gathers and scatters as
# ``aten::index.Tensor`` / ``aten::index_put`` without the bounds check of the indices. An
# archive is untrusted input, so pt2rt's operator policy refuses the unchecked pair at load
# (schema/README.md "Operator policy"); the exporter writes the checked ops instead, which
# compute the same values for in-range indices (the only ones a traced model produces) and
# exist in LibTorch 1.13 too.

def _index_checked(self, indices):
    return aten.index.Tensor(self, indices)


def _index_put_checked(self, indices, values, accumulate=False):
    return aten.index_put.default(self, indices, values, accumulate)


# Attention captured on its math path (portability.py) normalises scores with
# ``aten::_safe_softmax`` (torch >= 2.5: softmax whose fully masked rows, all -inf, give zeros
# instead of NaN), which LibTorch 1.13 lacks. Written as ``_softmax`` with those rows filled
# with zeros — torch._decomp's own decomposition of the op — with ops both LibTorch lines have;
# the backward stays ``_softmax_backward_data`` (decompositions run below autograd).

def _safe_softmax(self, dim, dtype=None):
    x = self if dtype is None else aten._to_copy.default(self, dtype=dtype)
    out = aten._softmax.default(x, dim, False)
    masked_rows = aten.all.dim(aten.eq.Scalar(x, float("-inf")), dim, True)
    return aten.masked_fill.Scalar(out, masked_rows, 0.0)


# torch 2.x's linear algebra (linalg.inv, solve, cholesky, lu_factor, eig, tensorinv, ...) ends
# in ``aten::_linalg_check_errors(info, api_name, is_matrix)``, which raises eager's error
# ("the input matrix is singular", "not positive-definite") when LAPACK's ``info`` is nonzero.
# torch 2.14 registers it as an ordered side effect (torch/_higher_order_ops/effects.py), so
# AOTAutograd threads effect tokens through it: ``with_effects(token, _linalg_check_errors,
# ...)`` with ForwardToken/BackwardToken graph inputs, a higher-order op no LibTorch can run
# and tokens the runtime does not feed. While tracing (``linalg_checks_as_asserts``) the op is
# an ordinary op again and is decomposed into ``_assert_async(all(info == 0), msg)``: the same
# check, run by the C++ runtime as a host-side check (runtime/kernels/native_ops.h) that raises with
# the message, with no token. (torch 1.13's make_fx drops the check, which returns nothing:
# a singular input then gives inf/NaN there, as ``torch.linalg.inv_ex`` does.)

def _linalg_check_errors(info, api_name, *, is_matrix=True):
    ok = aten.all.default(aten.eq.Scalar(info, 0))
    what = "matrix" if is_matrix else "batch of matrices"
    message = (f"torch.{api_name}: LAPACK reported an invalid input {what} (singular, not "
               "positive-definite or not convergent)")
    if hasattr(aten._assert_async, "msg"):
        aten._assert_async.msg(ok, message)
    else:
        aten._assert_async.default(ok)


@contextlib.contextmanager
def linalg_checks_as_asserts() -> Iterator[None]:
    """For the duration of a trace, ``aten::_linalg_check_errors`` is not an ordered effect
    (see above); its registration is put back afterwards. No-op where torch does not register
    it (torch 1.13, torch 2.x before the registration)."""
    try:
        from torch._higher_order_ops import effects
    except ImportError:
        yield
        return
    get = getattr(effects, "_get_effect", None)
    register = getattr(effects, "_register_effectful_op", None)
    op = getattr(aten, "_linalg_check_errors", None)
    prior = None
    if get is not None and register is not None and op is not None:
        try:
            prior = get(op.default)
        except Exception:  # a torch whose registry takes other keys: leave it alone
            prior = None
    if prior is None:
        yield
        return
    register(op.default, None)
    try:
        yield
    finally:
        register(op.default, prior)


def _prelu_decompositions() -> Dict[torch._ops.OpOverload, Callable]:
    """torch._decomp's own decompositions of ``_prelu_kernel`` and its backward (``where`` and
    ``mul``; torch >= 2.0 calls them for ``nn.PReLU``, and LibTorch 1.13 has neither): a
    lane-2 PReLU archive then runs on LibTorch 1.13 too. Empty on a torch without them. (The
    other way round, torch 1.13's ``prelu_backward`` is not in LibTorch 2.x: lane 1.13 writes
    it with ``_prelu_backward_portable``; 1.13's own decomposition of it emits ``prims`` ops,
    which no LibTorch runs.)"""
    ops = [getattr(aten, n, None) for n in ("_prelu_kernel", "_prelu_kernel_backward")]
    if any(op is None for op in ops):
        return {}
    from torch._decomp import get_decompositions
    table = get_decompositions(ops)
    return table if all(op.default in table for op in ops) else {}


def portable_decompositions() -> Dict[torch._ops.OpOverload, Callable]:
    """The decomposition table capture_torch2 applies before the caller's (see above)."""
    return {**_prelu_decompositions(),
            aten._native_batch_norm_legit_functional.default: _legit_functional,
            aten._native_batch_norm_legit_no_training.default: _legit_no_training,
            aten._native_batch_norm_legit.no_stats: _legit_no_stats,
            aten._unsafe_index.Tensor: _index_checked,
            aten._unsafe_index_put.default: _index_put_checked,
            **({aten._safe_softmax.default: _safe_softmax}
               if hasattr(aten, "_safe_softmax") else {}),
            aten._linalg_check_errors.default: _linalg_check_errors,
            **({aten._batch_norm_with_update_functional.default: _with_update_functional,
                aten._batch_norm_no_update.default: _no_update,
                aten.batch_norm_backward.default: _batch_norm_backward}
               if hasattr(aten, "_batch_norm_with_update_functional") else {})}


# ---------------------------------------------------------------------------
# torch >= 2 (capture_torch2): torch's own decomposition of nn.LSTM, fixed.
#
# ``aten.lstm.input``'s decomposition (torch/_decomp/decompositions.py, ``lstm_impl``) runs
# ``one_layer_lstm`` per layer, which carries the state as [1, batch, hidden] and returns it
# with ``hx.squeeze(1)`` — a no-op for batch > 1 — in torch releases up to at least 2.11 (2.14
# squeezes dim 0). The captured h_n / c_n were then [layers, 1, batch, hidden] where eager's
# kernel returns [layers, batch, hidden]: a silently different output shape. While tracing,
# the layer function's final states are squeezed to [batch, hidden]; a release that already
# returns them so is left as it is.

@contextlib.contextmanager
def lstm_final_state_fix() -> Iterator[None]:
    """Wraps ``torch._decomp.decompositions.one_layer_lstm`` for the duration of a trace."""
    try:
        from torch._decomp import decompositions as decomp
    except ImportError:  # torch 1.13: nn.LSTM is traced through its C++ kernel
        yield
        return
    original = getattr(decomp, "one_layer_lstm", None)
    if original is None:
        yield
        return

    def fixed(*args, **kwargs):
        out, (hx, cx) = original(*args, **kwargs)
        return out, (hx.squeeze(0) if hx.dim() == 3 else hx, cx.squeeze(0) if cx.dim() == 3 else cx)
    decomp.one_layer_lstm = fixed
    try:
        yield
    finally:
        decomp.one_layer_lstm = original
