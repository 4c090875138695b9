"""Device portability: an archive captured on any device runs on every device with parity.

The C++ runtime runs an archive on the CPU or on CUDA (``Model::load(path, device)``), so
nothing in the captured graphs may depend on the device the export ran on. Four parts:

* ``on_cpu(model, inputs)``: the capture always traces on the CPU. A model and inputs on CUDA
  are copied to the CPU for the trace (parameters and buffers by swapping their ``.data``,
  restored afterwards; the user's tensors and module objects are kept), so the graph is the
  model's device-neutral computation: composite ops that pick a kernel family from
  ``input.is_cuda()`` at trace time (``nn.LSTM``'s ``_thnn_fused_lstm_cell``, cuDNN
  BatchNorm / RNN, fused attention) never land in an archive. The eager references are still
  computed on the model's own device (``examples.py``); ``Producer.capture_device`` (schema
  1.5) records it.
* ``portable_kernels()``: while tracing, the composite ops that choose a backend at trace time
  take their plain ATen path — oneDNN, NNPACK (torch >= 2 only: ``cpu_kernel_choice_recorded``)
  and cuDNN off (``torch.backends.*.flags``), and
  ``F.scaled_dot_product_attention`` on its math backend
  (``torch.nn.attention.sdpa_kernel(SDPBackend.MATH)``, torch >= 2.3) instead of
  ``_scaled_dot_product_flash_attention_for_cpu``, which has no CUDA kernel — where it is not
  one ``pt2rt::scaled_dot_product_attention`` node (``ops/attention_ops.py``). With symbolic
  shapes, ``torch._C._select_conv_backend`` and ``_conv_determine_backend_memory_format`` (called
  by torch's fake convolution to pick the output's memory format) run on tensors of the
  symbols' hints: a kernel-choice condition such as NNPACK's ``batch >= 16`` (pip wheels of
  torch 2.11) then reads a hint instead of installing a guard that would narrow a
  ``Dim``'s range.
* ``device_dependent_results(target, args)`` (``ops/device_dependence.py``): results whose
  *shape* legitimately differs by device (eval-mode BatchNorm's ``save_mean``/``save_invstd``: ``[0]`` on the CPU, ``[C]`` on
  CUDA and meta; ``_embedding_bag``'s ``offset2bag`` and ``max_indices``). The lowering marks
  them (``Value.device_dependent_shape``) and the runtime checks them by dtype and a size bound
  instead of the shape the exporting device produced.
* ``check_portable(graphs)``: a refusal, naming op and node, of any op from a device-specific
  kernel family left in a captured graph (``*_for_cpu``, ``cudnn``, ``miopen``, ``mkldnn``,
  ``mps``, flash / efficient / cuDNN attention, NNPACK, XNNPACK, fused CUDA-only cells).

References: torch.backends (``mkldnn.flags``, ``nnpack.flags``, ``cudnn.flags``),
``torch.nn.attention.sdpa_kernel``; pytorch#85960 / #100985 (BatchNorm's device-dependent
saved statistics; ``native_batch_norm_helper`` in ``torch/_decomp/decompositions.py``).
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator, List, Sequence, Tuple

import torch

from ..errors import CaptureError
from ..ops.device_dependence import device_specific

aten = torch.ops.aten

# ---------------------------------------------------------------------------
# Capture on the CPU


def _device_of(model: torch.nn.Module, inputs: Sequence[torch.Tensor]) -> torch.device:
    for t in list(model.parameters()) + list(model.buffers()) + list(inputs):
        if t.device.type != "cpu":
            return t.device
    return torch.device("cpu")


@contextlib.contextmanager
def on_cpu(model: torch.nn.Module,
           inputs: Sequence[torch.Tensor]) -> Iterator[Tuple[List[torch.Tensor], str]]:
    """Yields (the inputs on the CPU, the capture device's type: "cpu", "cuda", ...). While
    open, every parameter and buffer of ``model`` not on the CPU holds a CPU copy of its data
    (``.data`` swapped; ``requires_grad`` and object identity kept); the originals are put
    back on exit, also after an exception. Inputs on the CPU are passed through as they are;
    others are copied, keeping ``requires_grad``."""
    device = _device_of(model, inputs)
    if device.type == "cpu":
        yield list(inputs), "cpu"
        return
    swapped = []
    seen = set()
    for t in list(model.parameters()) + list(model.buffers()):
        if id(t) in seen or t.device.type == "cpu":
            continue
        seen.add(id(t))
        swapped.append((t, t.data))
        t.data = t.data.cpu()
    try:
        yield ([x if x.device.type == "cpu" else
                x.detach().cpu().requires_grad_(x.requires_grad) for x in inputs], device.type)
    finally:
        for t, data in swapped:
            t.data = data


# ---------------------------------------------------------------------------
# Backend choices while tracing


def _sdpa_math() -> Any:
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch 1.13: no fused attention to avoid
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.MATH])


def _symbolic(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and any(
        isinstance(s, torch.SymInt) for s in tuple(t.shape) + tuple(t.stride()))


def _at_hint(t: Any) -> Any:
    """A fake tensor with ``t``'s hinted sizes and strides (static), on its fake device; ``t``
    itself when it has no symbolic size or is not a fake tensor."""
    if not _symbolic(t) or getattr(t, "fake_mode", None) is None:
        return t
    with t.fake_mode:
        return torch.empty_strided([_hint(s) for s in t.shape], [_hint(s) for s in t.stride()],
                                   dtype=t.dtype, device=t.device)


def _hint(s: Any) -> int:
    """The example value of a SymInt, read without a guard (the helper's name varies across
    torch 2.x: hint_int, optimization_hint)."""
    if not isinstance(s, torch.SymInt):
        return int(s)
    from torch.fx.experimental import symbolic_shapes
    for name in ("hint_int", "optimization_hint"):
        fn = getattr(symbolic_shapes, name, None)
        if fn is not None:
            return int(fn(s))
    return int(s.node.hint)


@contextlib.contextmanager
def _conv_backend_choice_at_hints() -> Iterator[None]:
    """torch 2.x's fake convolution asks ATen which kernel the eager CPU call would run
    (``_select_conv_backend``) and in which memory format (``_conv_determine_backend_memory_
    format``): conditions on a symbolic size there install guards that only reflect a kernel
    choice. Evaluated at the hints, they decide the same layout for the traced example and
    guard nothing."""
    names = ("_select_conv_backend", "_conv_determine_backend_memory_format")
    originals = {n: getattr(torch._C, n, None) for n in names}

    def at_hints(fn):
        def wrapped(*args, **kwargs):
            return fn(*[_at_hint(a) for a in args], **{k: _at_hint(v) for k, v in kwargs.items()})
        return wrapped
    for n, fn in originals.items():
        if fn is not None:
            setattr(torch._C, n, at_hints(fn))
    try:
        yield
    finally:
        for n, fn in originals.items():
            if fn is not None:
                setattr(torch._C, n, fn)


def cpu_kernel_choice_recorded() -> bool:
    """Whether a capture on the running torch could record a CPU kernel family chosen by
    oneDNN's or NNPACK's flags (torch >= 2: fake-tensor tracing through AOTAutograd's
    decompositions reaches composite ops that pick a backend in traced code, e.g. SDPA's
    ``_scaled_dot_product_flash_attention_for_cpu``, NNPACK's convolution guard on symbolic
    sizes). torch 1.13's ``make_fx`` records ``aten.convolution`` / ``convolution_backward``
    above ``_convolution``'s backend choice and has no SDPA, so its graphs do not depend on
    those flags (``test_portability.py`` checks it); there the flags only decided which kernels
    the real-tensor trace ran — with oneDNN off, the reference ``slow_conv2d``, which doubled
    a conv net's export time."""
    return int(torch.__version__.split(".")[0]) >= 2


@contextlib.contextmanager
def portable_kernels() -> Iterator[None]:
    """The backend flags and hooks of the module docstring, for the duration of a trace."""
    with warnings.catch_warnings(), contextlib.ExitStack() as stack:
        if cpu_kernel_choice_recorded():
            # mkldnn.flags() also resets the TF32 setting, which warns on builds without Intel
            # GPU support: that warning is noise here.
            warnings.filterwarnings("ignore", message="TF32 acceleration on top of oneDNN")
            stack.enter_context(torch.backends.mkldnn.flags(enabled=False))
            nnpack = getattr(torch.backends, "nnpack", None)
            if nnpack is not None and hasattr(nnpack, "flags"):
                stack.enter_context(nnpack.flags(enabled=False))
        stack.enter_context(torch.backends.cudnn.flags(enabled=False))
        stack.enter_context(_sdpa_math())
        stack.enter_context(_conv_backend_choice_at_hints())
        yield


def check_portable(graphs: Sequence[Any]) -> None:
    """Refuses graphs (``graph_ir.DescribedGraph``) holding a device-specific op.

    Raises:
        CaptureError: naming the op, the graph and the node.
    """
    for g in graphs:
        for node in g.module.graph.nodes:
            schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
            if schema is not None and device_specific(schema.name):
                raise CaptureError(
                    f"pt2rt.export: the {g.role.name} graph calls {schema.name} (node "
                    f"{node.name}), a kernel of one device family only: the archive would not "
                    "run on every device (exporter/README.md \"Portable archives\" lists the "
                    "ops pt2rt keeps portable; call the generic op, e.g. "
                    "F.scaled_dot_product_attention, instead of a backend-specific one)")
