"""Float64 references of models that create float32 tensors themselves.

The float64 references (``examples.py``, schema 1.5) run a float64 copy of the model: its
parameters, buffers and inputs cast. A model that makes tensors of its own in float32 —
``torch.arange(h).float()`` for a coordinate grid (torchvision's RAFT), ``torch.zeros(n)`` with
the default dtype, ``x.to(torch.float32)`` — then mixes float32 with float64, and ops that
need one dtype (``grid_sample``, ``bmm``, ``index_put``) raise: the model got no float64
references, and ``export-cli verify`` on another device or LibTorch had no float64 rule for
it (a gradient that is rounding noise, such as a convolution bias before an InstanceNorm,
then failed the plain tolerance).

``float64_everywhere`` runs a block with float64 as the default dtype
(``torch.set_default_dtype``) and a ``TorchFunctionMode`` that asks for float64 wherever the
model's code asks for float32: a ``dtype=torch.float32`` argument (factories, ``to``,
``new_*``, reductions), ``Tensor.float()`` and ``Tensor.to(torch.float32)``. The result is
the model's computation with float64 throughout — what the float64 rule compares eager
float32's rounding against. ``examples._float64_runs`` uses it only when the plain float64
copy fails, so other models' references are made exactly as before.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch.overrides import TorchFunctionMode


def _wide(value):
    return torch.float64 if value is torch.float32 else value


class _Float64Dtypes(TorchFunctionMode):
    """float32 requested by the model's code -> float64 (see the module docstring)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = {k: _wide(v) if k == "dtype" else v for k, v in (kwargs or {}).items()}
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        elif func is torch.Tensor.to or func is torch.Tensor.type:
            args = tuple(_wide(a) for a in args)
        return func(*args, **kwargs)


@contextlib.contextmanager
def float64_everywhere() -> Iterator[None]:
    """Within the block, float32 tensors the model makes are float64 (module docstring); the
    default dtype is restored on exit, also on an exception."""
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with _Float64Dtypes():
            yield
    finally:
        torch.set_default_dtype(default)
