"""``F.interpolate`` captured as ATen's upsample kernels, not as torch._decomp's index math.

On torch 2.x, ``torch/_decomp/decompositions.py`` registers Python kernels
(``OpOverload.py_impl``) for the ``CompositeImplicitAutograd`` and ``Autograd`` keys of the
upsample ops (``upsample_nearest2d.vec`` and ``.default``, ``upsample_bilinear2d.vec`` and
``.default``, ...). Under AOTAutograd's Python dispatcher they replace the kernels by index
arithmetic (``arange``, ``_unsafe_index``, lerp weights) whose scale is
``input size / output size`` in floating point. With a dynamic H or W that scale is a SymFloat,
which an archive's SymInt ops cannot express, so ``F.interpolate(x, size=y.shape[-2:])`` — every
torchvision segmentation head — could not be exported with a dynamic image size.

For the duration of a capture (``upsample_as_kernels``):

* each ``.vec`` overload (the one ``F.interpolate`` calls) computes its output size as the C++
  CompositeImplicitAutograd kernel does (``compute_output_size`` in ATen's ``UpSample.cpp``:
  the given ``output_size``, or ``input size * scale`` — a SymInt product for whole-number
  scales) and calls the ``.default`` overload with the per-dim scales, as ATen's
  ``upsample_bilinear2d(input, output_size, align_corners, scale_factors)`` does;
* the ``.default`` overloads lose their Python kernels, so autograd takes ATen's derivative
  formula (``upsample_*_backward``, derivatives.yaml) and the graph records one kernel call;
* the backward ops that have no Python meta function (``upsample_bilinear2d_backward``,
  ``upsample_linear1d_backward``, ...: their C++ meta functions take ``int[]``, not
  ``SymInt[]``) get a FakeTensor rule: a gradient of ``input_size``, in ``grad_output``'s
  dtype, device and suggested memory format — what ATen's structured meta functions declare.

The graphs then hold ``aten.upsample_*.default`` in forward and ``aten.upsample_*_backward``
in backward: the kernels eager runs on each device, with SymInt[] sizes, in both LibTorch 1.13
and 2.x (torch 1.13's capture already records them). A scale factor on a dynamic dim still
makes ``floor(size * scale)`` in floating point: ``graph_passes.integral_sizes_without_floats``
writes it as integer arithmetic for a short binary fraction (0.5, 1.5), and the lowering
refuses any other, naming it.
The Python kernels are put back on exit — the mechanism torch.export's own
``_override_composite_implicit_decomp`` uses to keep CompositeImplicitAutograd ops whole.
No-op on torch 1.13 (no Python kernels there).
"""
from __future__ import annotations

import contextlib
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import torch

aten = torch.ops.aten

# (op name, whether the schema has align_corners)
_UPSAMPLE_OPS: Tuple[Tuple[str, bool], ...] = (
    ("upsample_nearest1d", False), ("upsample_nearest2d", False),
    ("upsample_nearest3d", False), ("_upsample_nearest_exact1d", False),
    ("_upsample_nearest_exact2d", False), ("_upsample_nearest_exact3d", False),
    ("upsample_linear1d", True), ("upsample_bilinear2d", True), ("upsample_trilinear3d", True),
    ("upsample_bicubic2d", True), ("_upsample_bilinear2d_aa", True),
    ("_upsample_bicubic2d_aa", True),
)


def _keys() -> List["torch._C.DispatchKey"]:
    k = torch._C.DispatchKey
    return [k.CompositeImplicitAutograd, k.Autograd]


def _vec_kernel(default: torch._ops.OpOverload, align: bool,
                output_size_of: Callable) -> Callable:
    """ATen's CompositeImplicitAutograd ``.vec`` kernel: output size, then ``.default``."""
    def vec(input, output_size, *rest):
        align_corners, scale_factors = rest if align else (None, rest[0])
        osize = output_size_of(input.size(), output_size, scale_factors)
        scales = list(scale_factors) if scale_factors else [None] * len(osize)
        head = [align_corners] if align else []
        return default(input, osize, *head, *scales)
    return vec


def _backward_shape_rule(fake_mode, func, grad_output, output_size, input_size, *rest):
    """FakeTensor rule of an ``upsample_*_backward`` op: the gradient of the input."""
    from torch._prims_common import suggest_memory_format
    with fake_mode:
        return grad_output.new_empty(list(input_size)).contiguous(
            memory_format=suggest_memory_format(grad_output))


def _backwards_without_meta() -> List[torch._ops.OpOverload]:
    """The upsample backward ops FakeTensor can only run through their C++ meta function."""
    from torch._decomp import decomposition_table, meta_table
    out = []
    for name, _ in _UPSAMPLE_OPS:
        op = getattr(getattr(aten, name + "_backward", None), "default", None)
        if op is not None and op not in meta_table and op not in decomposition_table:
            out.append(op)
    return out


def _overloads() -> List[Tuple[torch._ops.OpOverload, torch._ops.OpOverload, bool]]:
    """(.vec, .default, align) of the upsample ops this torch has."""
    out = []
    for name, align in _UPSAMPLE_OPS:
        packet = getattr(aten, name, None)
        vec = getattr(packet, "vec", None) if packet is not None else None
        default = getattr(packet, "default", None) if packet is not None else None
        if vec is not None and default is not None:
            out.append((vec, default, align))
    return out


@contextlib.contextmanager
def upsample_as_kernels() -> Iterator[None]:
    """Within the block, the upsample ops trace as ATen kernels (see the module docstring);
    their Python kernels are restored on exit, also on an exception."""
    output_size_of: Optional[Callable] = None
    try:
        from torch._decomp.decompositions import upsample_compute_output_size
        output_size_of = upsample_compute_output_size
    except ImportError:  # torch 1.13: no Python kernels to override
        pass
    ops = _overloads() if output_size_of is not None else []
    saved: Dict[torch._ops.OpOverload, dict] = {}
    rule = None
    try:
        if ops:
            from torch._subclasses import fake_impls
            backwards = set(_backwards_without_meta())
            rule = ((lambda func: func in backwards), _backward_shape_rule)
            fake_impls.op_implementations_checks.insert(0, rule)
        for vec, default, align in ops:
            for op in (vec, default):
                saved[op] = dict(op.py_kernels)
            kernel = _vec_kernel(default, align, output_size_of)
            for key in _keys():
                default.py_kernels.pop(key, None)
                vec.py_kernels[key] = kernel
            for op in (vec, default):
                op._dispatch_cache.clear()
        yield
    finally:
        if rule is not None:
            fake_impls.op_implementations_checks.remove(rule)
        for op, kernels in saved.items():
            op.py_kernels.clear()
            op.py_kernels.update(kernels)
            op._dispatch_cache.clear()
