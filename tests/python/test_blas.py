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


def _warnings_of_two_exports():
    """The warnings logger "pt2rt.export" gets from two exports in a row."""
    model, x = torch.nn.Linear(3, 2), torch.randn(4, 3)
    records, log = _Records(), logging.getLogger("pt2rt.export")
    log.addHandler(records)
    try:
        pt2rt.export(model, (x,), bundle_examples=False)
        pt2rt.export(model, (x,), bundle_examples=False)
    finally:
        log.removeHandler(records)
    return records.messages


def test_an_export_on_the_reference_blas_warns_once_naming_the_remedy(monkeypatch):
    monkeypatch.setattr(pt2rt, "_BLAS_WARNED", [])
    blas.reference_blas.cache_clear()
    monkeypatch.setattr(blas, "reference_blas", lambda: "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3")
    warned = [m for m in _warnings_of_two_exports() if "reference BLAS" in m]
    assert len(warned) == 1
    assert "libopenblas0-openmp" in warned[0] and "/blas/libblas.so.3" in warned[0]


def test_openblas_pre_avx2_kernels_on_an_avx2_cpu_are_told(monkeypatch):
    monkeypatch.delenv("OPENBLAS_CORETYPE", raising=False)
    monkeypatch.setattr(blas, "_cpu_flags", lambda: frozenset({"sse3", "avx", "avx2", "fma"}))
    fake_lib = "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblasp-r0.3.21.so"
    monkeypatch.setattr(blas, "_mapped", lambda pattern: fake_lib)

    class Lib:
        def __init__(self, core: bytes):
            self.openblas_get_corename = lambda: core

    for core, told in ((b"Prescott", True), (b"Sandybridge", True), (b"Haswell", False),
                       (b"SkylakeX", False)):
        monkeypatch.setattr(blas.ctypes, "CDLL", lambda path, core=core: Lib(core))
        blas.openblas_fallback.cache_clear()
        assert (blas.openblas_fallback() == (fake_lib, core.decode())) is told, core
    monkeypatch.setattr(blas, "_cpu_flags", lambda: frozenset({"sse3", "avx"}))  # no AVX2
    monkeypatch.setattr(blas.ctypes, "CDLL", lambda path: Lib(b"Prescott"))
    blas.openblas_fallback.cache_clear()
    assert blas.openblas_fallback() is None
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")  # the user's choice stands
    monkeypatch.setattr(blas, "_cpu_flags", lambda: frozenset({"avx2", "fma"}))
    blas.openblas_fallback.cache_clear()
    assert blas.openblas_fallback() is None
    blas.openblas_fallback.cache_clear()


def test_an_export_on_fallback_openblas_kernels_warns_once_naming_the_variable(monkeypatch):
    monkeypatch.setattr(pt2rt, "_BLAS_WARNED", [])
    monkeypatch.setattr(blas, "reference_blas", lambda: None)
    monkeypatch.setattr(blas, "openblas_fallback",
                        lambda: ("/usr/lib/x86_64-linux-gnu/libopenblas.so.0", "Prescott"))
    warned = [m for m in _warnings_of_two_exports() if "OpenBLAS" in m]
    assert len(warned) == 1
    assert "OPENBLAS_CORETYPE=Haswell" in warned[0] and "Prescott" in warned[0]
