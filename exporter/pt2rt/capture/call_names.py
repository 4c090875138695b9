"""Names of the torch API calls a capture failed in, for refusals that name the op.

A static capture refuses an op whose implementation reads a traced tensor's value as a Python
number (``torch.quantile``'s range check of ``q``, ``F.gaussian_nll_loss``'s
``torch.any(var < 0)``): the tracer's error names the ATen op that read it
(``aten._local_scalar_dense``, ``aten.equal``) or nothing, not the call in the user's model.
``FailingCall`` is a ``TorchFunctionMode`` active while tracing: a mode sees the user's torch
API calls but not the calls made inside them (it is disabled while its handler runs), so the
call an exception leaves is the user-level op that raised it. ``api_name`` spells it as the
user wrote it.
"""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

from torch.overrides import TorchFunctionMode


def api_name(func: Any) -> str:
    """``torch.quantile``, ``torch.nn.functional.gaussian_nll_loss``, ``Tensor.index_reduce``."""
    name = getattr(func, "__name__", None) or repr(func)
    qual = getattr(func, "__qualname__", None) or name
    module = getattr(func, "__module__", None)
    if qual.startswith(("TensorBase.", "_TensorBase.", "Tensor.")):
        return "Tensor." + qual.split(".", 1)[1]
    if qual.startswith("_VariableFunctionsClass."):  # torch.<builtin>
        return "torch." + qual.split(".", 1)[1]
    if module in (None, "torch._C", "torch._C._VariableFunctions", "torch._VF"):
        module = "torch"
    if module.startswith("torch._C._"):  # torch._C._nn / _linalg / _fft / _special builtins
        sub = module[len("torch._C._"):]
        module = "torch." + {"nn": "nn.functional"}.get(sub, sub)
        if qual.startswith(sub + "_"):  # torch.linalg.lstsq is linalg_lstsq
            qual = qual[len(sub) + 1:]
    return f"{module}.{qual}"


class FailingCall(TorchFunctionMode):
    """Records, per exception, the outermost torch API call it propagated out of."""

    def __init__(self) -> None:
        super().__init__()
        self.failed_: List[Tuple[BaseException, Any]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            return func(*args, **(kwargs or {}))
        except Exception as e:
            if not any(e is seen for seen, _ in self.failed_):
                self.failed_.append((e, func))
            raise

    def call_of(self, e: BaseException) -> Optional[str]:
        """The API name of the call ``e`` (or an exception it was raised from) left; None
        when it did not come out of a torch API call."""
        chain = []
        while e is not None and len(chain) < 8:
            chain.append(e)
            e = e.__cause__ or e.__context__
        for c in chain:
            for seen, func in self.failed_:
                if seen is c:
                    return api_name(func)
        return None
