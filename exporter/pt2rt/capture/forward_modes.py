"""Torch-function modes that watch only the model's own code while a capture traces it.

The capture's ``TorchFunctionMode``s (``provenance``'s recorder, ``call_names.FailingCall``,
``traceable_ops.TraceableOps``) care about the torch API calls the *model* makes. Entered
around a whole capture they also see every call the tracer's own Python makes — AOTAutograd's
fakification, functionalization and backward tracing touch tensors tens of thousands of times
per export (resnet18: ~31,000 calls against ~400 from the model), and each call then passes
through every mode (about a tenth of a torch-2 capture's time).

``during_forward(model, modes)`` enters the modes only while a module of ``model`` runs its
``forward``: each module's ``forward`` is wrapped (an instance attribute, removed on exit) and
the outermost running one enters the modes, so a submodule run again outside the root's
forward (``torch.utils.checkpoint`` recomputing it during the backward) is watched too. The
modes are entered with ``with`` — properly nested with the tracer's own modes, also when the
forward raises. A function checkpointed on its own (no module inside) is not watched: its
calls then carry the provenance of the call before them.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, List, Sequence, Tuple

import torch


@contextlib.contextmanager
def during_forward(model: torch.nn.Module,
                   modes: Sequence[contextlib.AbstractContextManager]) -> Iterator[None]:
    """Within the block, ``modes`` (entered in order: the last one sees a call first) are
    active exactly while some module of ``model`` runs ``forward``. The same mode objects are
    entered again at each outermost call; they must allow that (a ``TorchFunctionMode`` does).
    Every module's ``forward`` is as before on exit."""
    depth = [0]

    def watched(forward: Callable) -> Callable:
        @functools.wraps(forward)  # its name is known to provenance._TRANSPARENT
        def _pt2rt_watched_forward(*args: Any, **kwargs: Any) -> Any:
            if depth[0]:
                return forward(*args, **kwargs)
            depth[0] += 1
            try:
                with contextlib.ExitStack() as stack:
                    for mode in modes:
                        stack.enter_context(mode)
                    return forward(*args, **kwargs)
            finally:
                depth[0] -= 1
        return _pt2rt_watched_forward

    wrapped: List[Tuple[torch.nn.Module, bool, Any]] = []
    try:
        for module in model.modules():
            own = "forward" in module.__dict__
            original = module.__dict__.get("forward")
            module.__dict__["forward"] = watched(module.forward)
            wrapped.append((module, own, original))
        yield
    finally:
        for module, own, original in reversed(wrapped):
            if own:
                module.__dict__["forward"] = original
            else:
                module.__dict__.pop("forward", None)
