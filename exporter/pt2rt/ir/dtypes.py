"""torch dtype / layout / memory_format <-> c10 enum numbers (schema ScalarType, Layout,
MemoryFormat; numbering equals c10's, c10/core/ScalarType.h etc.), and tensor <-> bytes.

Raises ``ExportError`` for a dtype or layout the format cannot hold (e.g. quantized tensors
with per-tensor parameters, sparse layouts other than those listed).
"""
from __future__ import annotations

import sys
from typing import List

import torch

from ..errors import ExportError, FormatError

SCALAR_TYPES = {
    torch.uint8: 0, torch.int8: 1, torch.int16: 2, torch.int32: 3, torch.int64: 4,
    torch.float16: 5, torch.float32: 6, torch.float64: 7, torch.complex32: 8,
    torch.complex64: 9, torch.complex128: 10, torch.bool: 11, torch.qint8: 12,
    torch.quint8: 13, torch.qint32: 14, torch.bfloat16: 15,
}
DTYPES = {v: k for k, v in SCALAR_TYPES.items()}
LAYOUTS = {torch.strided: 0, torch.sparse_coo: 1, torch.sparse_csr: 2, torch._mkldnn: 3}
LAYOUT_OBJECTS = {v: k for k, v in LAYOUTS.items()}
MEMORY_FORMATS = {torch.contiguous_format: 0, torch.preserve_format: 1,
                  torch.channels_last: 2, torch.channels_last_3d: 3}
MEMORY_FORMAT_OBJECTS = {v: k for k, v in MEMORY_FORMATS.items()}

if sys.byteorder != "little":  # the archive stores little-endian bytes
    raise ImportError("pt2rt: big-endian hosts are not supported")


def scalar_type(dtype: torch.dtype) -> int:
    try:
        return SCALAR_TYPES[dtype]
    except KeyError:
        raise ExportError(f"pt2rt: dtype {dtype} has no ScalarType in schema v1") from None


def to_dtype(code: int) -> torch.dtype:
    try:
        return DTYPES[code]
    except KeyError:
        raise FormatError(f"pt2rt: unknown ScalarType {code}") from None


def layout_code(layout: torch.layout) -> int:
    try:
        return LAYOUTS[layout]
    except KeyError:
        raise ExportError(f"pt2rt: layout {layout} has no Layout in schema v1") from None


def memory_format_code(fmt: torch.memory_format) -> int:
    return MEMORY_FORMATS[fmt]


def element_size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def contiguous_strides(sizes: List[int]) -> List[int]:
    strides, acc = [], 1
    for s in reversed(sizes):
        strides.append(acc)
        acc *= max(s, 1)
    return list(reversed(strides))


def tensor_bytes(t: torch.Tensor) -> bytes:
    """Raw little-endian bytes of ``t`` laid out contiguously (row-major), on CPU."""
    t = t.detach()
    if t.layout != torch.strided or t.is_quantized:
        raise ExportError(f"pt2rt: cannot store a {t.layout} / quantized tensor as raw bytes")
    if getattr(t, "_is_zerotensor", lambda: False)():  # autograd's ZeroTensor: no storage
        t = torch.zeros(t.shape, dtype=t.dtype)
    if t.is_conj():  # a conjugate view (fft.ifft's output): its values, not its storage
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    flat = t.cpu().contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy().tobytes()


def tensor_from_bytes(data: bytes, dtype: torch.dtype, sizes: List[int]) -> torch.Tensor:
    """Inverse of ``tensor_bytes`` (a fresh, writable, contiguous CPU tensor)."""
    numel = 1
    for s in sizes:
        numel *= s
    expected = numel * element_size(dtype)
    if len(data) != expected:
        raise FormatError(f"pt2rt: tensor data of {len(data)} bytes, expected {expected} for "
                          f"{dtype}{list(sizes)}")
    if numel == 0:
        return torch.empty(sizes, dtype=dtype)
    raw = torch.frombuffer(bytearray(data), dtype=torch.uint8)
    return raw.view(dtype).reshape(sizes)
