"""Debug provenance of traced nodes: ``nn_module_stack`` and the user's Python stack trace.

torch 1.13's ``make_fx`` records neither. We reuse the mechanism AOTAutograd 1.13 relies on
(``torch.fx.traceback``): while ``override_stack_trace()`` is active,

* every FX node created by a tracer gets ``node.stack_trace = "\\n".join(current_stack)``;
* every autograd node created in anomaly mode stores ``current_stack`` in
  ``grad_fn.metadata["traceback_"]``;
* ``torch.fx.Interpreter.run_node`` pushes the replayed node's ``stack_trace``.

``Provenance`` keeps ``current_stack`` equal to ``[token]``, where the token names a record
(module stack, filtered Python stack) taken at each torch API call by a ``TorchFunctionMode``
inside module forward hooks. Before ``autograd.grad`` runs, ``hook_backward`` installs pre-hooks
on the autograd graph (like functorch's ``setup_stacktrace_preservation_hooks``) so backward
ops inherit the token of the forward op they differentiate. ``Interpreter`` re-traces (the
functionalization pass) carry tokens along. ``resolve`` finally replaces tokens by
``node.meta["nn_module_stack"]`` (list of "fqn: Type", outermost first, root excluded) and
``node.meta["stack_trace"]``.

``MetaProvenance`` (end of file) is the torch 2.x variant: the same records, handed to
AOTAutograd through ``torch.fx.traceback.current_meta`` instead of tokens.
"""
from __future__ import annotations

import collections
import contextlib
import os
import sys
import traceback
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
import torch.fx as fx
import torch.fx.traceback as fx_traceback
from torch.overrides import TorchFunctionMode

_TOKEN_PREFIX = "pt2rt-provenance:"
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # pt2rt/
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_FUNCTORCH_DIR = os.path.join(os.path.dirname(_TORCH_DIR), "functorch")
# torch frames worth showing: the nn layer implementations.
_KEEP_TORCH = (os.path.join(_TORCH_DIR, "nn", "modules"),
               os.path.join(_TORCH_DIR, "nn", "functional.py"))
_DROP_TORCH = (os.path.join(_TORCH_DIR, "nn", "modules", "module.py"),)
_FRAME_KINDS: Dict[str, Tuple[bool, bool]] = {}  # filename -> (in pt2rt, shown to users)
# pt2rt frames that sit between user frames while tracing (not the capture's own call of the
# model): the modes' handlers and ``forward_modes``' wrapper of each module's forward.
_TRANSPARENT = ("__torch_function__", "_pt2rt_watched_forward")

Frames = Tuple[Tuple[str, int, str], ...]  # (filename, lineno, function), outermost first


def _under(path: str, directory: str) -> bool:
    return path.startswith(directory + os.sep)


def _classify(filename: str) -> Tuple[bool, bool]:
    kind = _FRAME_KINDS.get(filename)
    if kind is None:
        path = os.path.abspath(filename)
        if _under(path, _FUNCTORCH_DIR):
            user = False
        elif _under(path, _TORCH_DIR):  # torchvision/ is not torch/: shown
            user = path.startswith(_KEEP_TORCH) and not path.startswith(_DROP_TORCH)
        else:
            user = True
        kind = _FRAME_KINDS[filename] = (_under(path, _PKG_DIR), user)
    return kind


def _raw_user_stack(skip: int) -> Frames:
    """The caller's frames below the innermost pt2rt frame (the capture's call of the model),
    torch internals dropped. Cheap: source lines are read only when formatting."""
    # Called at every torch API call while tracing (tens of thousands per export, each
    # walking ~30 frames): the frame kinds are looked up inline, not through _classify.
    frames = []
    kinds = _FRAME_KINDS
    f = sys._getframe(skip)
    while f is not None:
        code = f.f_code
        kind = kinds.get(code.co_filename) or _classify(code.co_filename)
        if kind[0]:
            if code.co_name not in _TRANSPARENT:  # our modes sit between user frames
                break
        elif kind[1]:
            frames.append((code.co_filename, f.f_lineno, code.co_name))
        f = f.f_back
    kept = []
    for fr in reversed(frames):  # torch-function dispatch re-enters the same call: dedupe
        if not kept or kept[-1] != fr:
            kept.append(fr)
    return tuple(kept)


def _format(frames: Frames) -> str:
    return "".join(traceback.format_list(
        [traceback.FrameSummary(fn, ln, name) for fn, ln, name in frames]))


def user_stack(skip: int = 1) -> str:
    """The caller's stack as traceback text: frames of the model, of torch.nn layers and of
    user code below the innermost pt2rt frame. ``skip``: frames to skip (1 = the caller)."""
    return _format(_raw_user_stack(skip + 1))


def user_stack_of(tb) -> str:
    """The user frames (model code, torch.nn layers; not pt2rt, not torch internals) of a
    traceback, outermost first, as traceback text."""
    frames = []
    for fs in traceback.extract_tb(tb):
        in_pt2rt, user = _classify(fs.filename)
        if user and not in_pt2rt and (not frames or frames[-1] != (fs.filename, fs.lineno,
                                                                    fs.name)):
            frames.append((fs.filename, fs.lineno, fs.name))
    return _format(tuple(frames))


class _Mode(TorchFunctionMode):
    def __init__(self, prov: "Provenance"):
        super().__init__()
        self.prov_ = prov

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.prov_._mark()
        return func(*args, **(kwargs or {}))


class Provenance:
    """Collects provenance while tracing ``model``; see the module docstring."""

    def __init__(self, model: torch.nn.Module):
        self.names_: Dict[int, Tuple[str, str]] = {
            id(m): (fqn, type(m).__name__) for fqn, m in model.named_modules() if fqn}
        self.module_stack_: List[str] = []
        self.records_: List[Tuple[Tuple[str, ...], Frames]] = []
        self.formatted_: Dict[int, str] = {}
        self.active_ = False
        self.stack_version_ = 0  # bumped at each push / pop of module_stack_
        # The last _mark: (anchor frame, its line, stack version) and what it set (None: nothing)
        self.anchor_: Optional[Tuple[Any, int, int]] = None
        self.set_: Any = None

    # -- recording ----------------------------------------------------------------
    def _unchanged(self) -> bool:
        """Whether a _mark now would take the last _mark's record and find what it set still in
        place. The anchor is the innermost frame that is not torch-internal (a user or torch.nn
        frame, or a pt2rt frame other than those in ``_TRANSPARENT``): when it is the same
        live frame at the same line under the same module stack, every frame
        ``_raw_user_stack`` keeps is the same, so the record is too. Walks only the torch
        frames between the call and its anchor, not the whole stack: most torch API calls
        during a capture come from torch's own Python (fake tensors, functionalization)."""
        f = sys._getframe(3)  # the caller of the torch API (skip this, _mark, __torch_function__)
        kinds = _FRAME_KINDS
        while f is not None:
            code = f.f_code
            kind = kinds.get(code.co_filename) or _classify(code.co_filename)
            if kind[1] and not (kind[0] and code.co_name in _TRANSPARENT):
                break
            f = f.f_back
        last = self.anchor_
        if last is not None and last[0] is f and last[1] == (f.f_lineno if f else -1) \
                and last[2] == self.stack_version_ \
                and (self.set_ is None or self._still_set()):
            return True
        self.anchor_ = (f, f.f_lineno if f else -1, self.stack_version_)
        return False

    def _still_set(self) -> bool:
        """What the last _mark set (``self.set_``) is still in place."""
        return fx_traceback.current_stack is self.set_

    def _mark(self) -> None:
        if not self.active_ or self._unchanged():
            return
        frames = _raw_user_stack(3)  # skip _raw_user_stack, _mark and __torch_function__
        rec = (tuple(self.module_stack_), frames)
        if not self.records_ or self.records_[-1] != rec:
            self.records_.append(rec)
        fx_traceback.set_stack_trace([_TOKEN_PREFIX + str(len(self.records_) - 1)])
        self.set_ = fx_traceback.current_stack

    def _pre_hook(self, module, inputs):
        name = self.names_.get(id(module))
        if name is not None and self.active_:
            self.module_stack_.append(f"{name[0]}: {name[1]}")
            self.stack_version_ += 1

    def _post_hook(self, module, inputs, outputs):
        if id(module) in self.names_ and self.active_ and self.module_stack_:
            self.module_stack_.pop()
            self.stack_version_ += 1

    @contextlib.contextmanager
    def _watching_modules(self) -> Iterator[None]:
        """Records from now on: module forward hooks keep ``module_stack_``."""
        handles = [torch.nn.modules.module.register_module_forward_pre_hook(self._pre_hook),
                   torch.nn.modules.module.register_module_forward_hook(self._post_hook)]
        self.active_ = True
        try:
            yield
        finally:
            self.active_ = False
            self.module_stack_.clear()
            self.anchor_ = self.set_ = None  # holds a frame (and its locals) alive
            for h in handles:
                h.remove()

    @contextlib.contextmanager
    def recording(self, record_calls: bool = True) -> Iterator[None]:
        """Active around a trace. ``record_calls``: take records at torch API calls (first
        trace); False when replaying a graph whose nodes already carry tokens."""
        fx_traceback.current_stack = []
        with contextlib.ExitStack() as stack:
            stack.enter_context(fx_traceback.override_stack_trace())
            if record_calls:
                stack.enter_context(self._watching_modules())
                stack.enter_context(torch.autograd.set_detect_anomaly(True, check_nan=False))
                stack.enter_context(_Mode(self))
            try:
                yield
            finally:
                fx_traceback.current_stack = []

    def hook_backward(self, outputs: List[torch.Tensor]) -> None:
        """Before autograd.grad: make each backward node's ops inherit its forward token."""
        self.active_ = False  # torch calls made by the engine are not user calls
        seen = set()
        queue = collections.deque(t.grad_fn for t in outputs if t.grad_fn is not None)
        seen.update(queue)
        while queue:
            node = queue.popleft()
            stack = list(node.metadata.get("traceback_", []))
            if stack:
                node.register_prehook(self._make_prehook(stack))
                node.register_hook(self._make_posthook(stack))
            for nxt, _ in node.next_functions:
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    queue.append(nxt)

    @staticmethod
    def _make_prehook(stack):
        def prehook(grad_outputs):
            fx_traceback.set_stack_trace(stack)
        return prehook

    @staticmethod
    def _make_posthook(stack):
        def posthook(grad_inputs, grad_outputs):
            fx_traceback.set_stack_trace(stack)  # gradient accumulation of this node's inputs
        return posthook

    # -- resolving ----------------------------------------------------------------
    def lookup(self, stack_trace: Optional[str]) -> Optional[Tuple[Tuple[str, ...], str]]:
        if not stack_trace:
            return None
        for line in stack_trace.splitlines():  # most recent push first
            if line.startswith(_TOKEN_PREFIX):
                i = int(line[len(_TOKEN_PREFIX):])
                if 0 <= i < len(self.records_):
                    if i not in self.formatted_:
                        self.formatted_[i] = _format(self.records_[i][1])
                    return self.records_[i][0], self.formatted_[i]
        return None

    def resolve(self, gm: fx.GraphModule) -> None:
        """Replace tokens in ``gm``'s nodes by ``meta['nn_module_stack']`` / ``['stack_trace']``."""
        for node in gm.graph.nodes:
            rec = self.lookup(node.stack_trace)
            if rec is not None:
                node.meta["nn_module_stack"] = list(rec[0])
                node.meta["stack_trace"] = rec[1]
                node.stack_trace = rec[1]
            elif node.stack_trace and _TOKEN_PREFIX in node.stack_trace:
                node.stack_trace = None


class MetaProvenance(Provenance):
    """Provenance for torch 2.x's AOTAutograd capture (``capture_torch2``).

    AOTAutograd traces under ``torch.fx.traceback.preserve_node_meta()``: every node it creates
    copies ``stack_trace`` and ``nn_module_stack`` from ``torch.fx.traceback.current_meta``, and
    backward nodes take the meta of the forward node they differentiate (matched by autograd
    ``seq_nr``). At each torch API call this recorder sets those two entries from the same
    records ``Provenance`` takes (module stack from forward hooks, user frames), in
    AOTAutograd's own format (``nn_module_stack`` = {fqn: (fqn, type name)}), so the nodes carry
    them without tokens to resolve.
    """

    def __init__(self, model: torch.nn.Module):
        super().__init__(model)
        self.meta_: Dict[Tuple[Tuple[str, ...], Frames], Tuple[dict, str]] = {}

    def _still_set(self) -> bool:
        meta = fx_traceback.current_meta
        return meta.get("nn_module_stack") is self.set_[0] \
            and meta.get("stack_trace") is self.set_[1]

    def _mark(self) -> None:
        if not self.active_ or self._unchanged():
            return
        self.set_ = None
        # Calls from AOTAutograd's own Python (generated dataclass code shows up as "<string>")
        # are not user calls: they must not relabel the nodes that follow.
        frames = tuple(f for f in _raw_user_stack(3) if not f[0].startswith("<"))
        if not frames:
            return
        key = (tuple(self.module_stack_), frames)
        meta = self.meta_.get(key)
        if meta is None:
            stack = {}
            for entry in key[0]:
                fqn, _, typ = entry.partition(": ")
                stack[fqn] = (fqn, typ)
            meta = self.meta_[key] = (stack, _format(key[1]))
        stack = fx_traceback.current_meta["nn_module_stack"] = dict(meta[0])
        fx_traceback.current_meta["stack_trace"] = meta[1]
        self.set_ = (stack, meta[1])

    @contextlib.contextmanager
    def recording(self, record_calls: bool = True) -> Iterator[None]:
        """Active around an AOTAutograd capture: node meta preserved, module stack kept. The
        records themselves are taken by ``mode()``, which the capture enters only while the
        model runs (``forward_modes.during_forward``)."""
        # AOTAutograd's joint path preserves node meta itself; its inference path does not.
        with fx_traceback.preserve_node_meta(), self._watching_modules():
            yield

    def mode(self) -> TorchFunctionMode:
        """The ``TorchFunctionMode`` that takes a record at each torch API call."""
        return _Mode(self)
