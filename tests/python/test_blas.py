"""capture/blas.py: the reference-BLAS warning at export."""
from __future__ import annotations

import logging

import torch

import pt2rt
from pt2rt.capture import blas


def test_the_reference_blas_is_told_from_optimized_ones():
    ref = blas._REFERENCE
    assert ref.search("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0")
    assert ref.search("/usr/lib/aarch64-linux-gnu/blas/libblas.so.3")
    assert not ref.search("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3")
    assert not ref.search("/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblasp-r0.3.21.so")
    assert not ref.search("/opt/intel/mkl/lib/libmkl_rt.so")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_an_export_on_the_reference_blas_warns_once_naming_the_remedy(monkeypatch):
    monkeypatch.setattr(pt2rt, "_BLAS_WARNED", [])
    blas.reference_blas.cache_clear()
    monkeypatch.setattr(blas, "reference_blas", lambda: "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3")
    model, x = torch.nn.Linear(3, 2), torch.randn(4, 3)
    records, log = _Records(), logging.getLogger("pt2rt.export")
    log.addHandler(records)
    try:
        pt2rt.export(model, (x,), bundle_examples=False)
        pt2rt.export(model, (x,), bundle_examples=False)
    finally:
        log.removeHandler(records)
    warned = [m for m in records.messages if "reference BLAS" in m]
    assert len(warned) == 1
    assert "libopenblas0-openmp" in warned[0] and "/blas/libblas.so.3" in warned[0]
