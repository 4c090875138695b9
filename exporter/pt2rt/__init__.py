"""pt2rt: export a PyTorch model's inference graph and joint forward/backward graphs (with
AOTAutograd-style descriptors) plus its weights into one archive, ``model.pt2``, for the C++
runtime (inference and training on LibTorch).

    import pt2rt
    exported = pt2rt.export(model, (x,), partitioner="min_cut")
    exported.save("model.pt2")
    loaded = pt2rt.load("model.pt2")        # reader + reference executor
    loaded.run_inference(x)

Pipeline: ``capture`` (joint trace, descriptors) -> ``partition`` (forward/backward) ->
``lower`` + ``serialize`` (FlatBuffer Program) -> ``archive`` (aligned STORED zip).
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

import torch

from .capture.dynamic import DerivedDim, Dim
from .capture.none_outputs import none_outputs_dropped
from .capture.specialized_inputs import scalars_specialized
from .errors import CaptureError, ExportError, ExportTypeError, FormatError, InputError
from .format.reader import LoadedArchive, load
from .ir.descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from .ir.graph_ir import CapturedProgram, DescribedGraph, GraphRole
from .ir.program_ir import Program
from .version import __version__

__all__ = ["export", "load", "Dim", "ExportedArchive", "LoadedArchive", "ExportError",
           "ExportTypeError", "CaptureError", "FormatError", "InputError", "GraphRole",
           "InputDescriptor",
           "OutputDescriptor", "InputKind", "OutputKind", "__version__"]


class ExportedArchive:
    """The result of ``export``: captured FX graphs, the lowered Program and its FlatBuffer
    bytes, and the weight blobs. ``save(path)`` writes model.pt2."""

    def __init__(self, captured: CapturedProgram, program: Program, program_bytes: bytes,
                 weight_blobs: List[Tuple[str, bytes]]):
        self.captured = captured
        self.program = program
        self.program_bytes = program_bytes
        self.weight_blobs = weight_blobs

    @property
    def graphs(self) -> List[DescribedGraph]:
        """The FX graphs with descriptors (inference, forward, backward as exported)."""
        return self.captured.graphs

    def graph(self, role: GraphRole) -> DescribedGraph:
        g = self.captured.graph(role)
        if g is None:
            raise KeyError(f"pt2rt: no {role.name} graph was exported")
        return g

    def saved_activations(self) -> Dict[str, int]:
        """Saved(k) outputs of the forward graph: ``count`` and ``bytes`` of all of them, and
        ``activation_count`` / ``activation_bytes`` of those that are not graph inputs
        (parameters or user inputs saved as they are cost no extra memory). Symbolic sizes
        count at the example's sizes (their hints); saved SymInts are not counted."""
        fwd = self.program.graph(GraphRole.Forward)
        if fwd is None:
            raise KeyError("pt2rt: no forward graph was exported")
        inputs = {gi.value for gi in fwd.inputs}
        from .ir.dtypes import element_size, to_dtype
        stats = {"count": 0, "bytes": 0, "activation_count": 0, "activation_bytes": 0}
        for go in fwd.outputs:
            if not go.descriptor.is_saved():
                continue
            meta = fwd.values[go.value].meta
            if meta is None:  # a SymInt saved for backward (dynamic shapes): no tensor bytes
                continue
            numel = 1
            for d in meta.sizes:
                numel *= d.value
            nbytes = numel * element_size(to_dtype(meta.dtype))
            stats["count"] += 1
            stats["bytes"] += nbytes
            if go.value not in inputs:
                stats["activation_count"] += 1
                stats["activation_bytes"] += nbytes
        return stats

    def save(self, path: str, extra: Optional[Mapping[str, bytes]] = None) -> None:
        """Writes the archive atomically; ``extra`` files go to ``extra/<name>``."""
        from .format.archive import write_archive
        write_archive(path, self.program_bytes, self.weight_blobs, extra)

    def summary(self) -> str:
        lines = [f"pt2rt archive ({self.captured.capture}"
                 + (f", partitioner {self.captured.partitioner}" if self.captured.partitioner
                    else "") + ")"]
        for g in self.program.graphs:
            lines.append(f"  {g.role.name:9s} {len(g.nodes):5d} nodes, {len(g.inputs)} inputs, "
                         f"{len(g.outputs)} outputs")
        nbytes = sum(len(b) for _, b in self.weight_blobs)
        lines.append(f"  weights: {len(self.weight_blobs)} tensors, {nbytes} bytes; "
                     f"program.fb: {len(self.program_bytes)} bytes; "
                     f"{len(self.program.operators)} operators")
        if self.program.graph(GraphRole.Forward) is not None:
            s = self.saved_activations()
            lines.append(f"  saved for backward: {s['count']} tensors, {s['bytes']} bytes")
        return "\n".join(lines)


def _op_nodes(graph: DescribedGraph) -> int:
    """Operator calls in a captured graph (tuple-element reads not counted), as inspect shows."""
    return sum(1 for n in graph.module.graph.nodes
               if n.op == "call_function" and getattr(n.target, "__name__", "") != "getitem")


_BLAS_WARNED = []


def _warn_reference_blas(log: logging.Logger) -> None:
    """Once per process: torch multiplies matrices with the reference BLAS, or with OpenBLAS
    kernels older than the CPU (``capture/blas.py``), which makes exports (and everything else)
    about ten or four times slower."""
    from .capture.blas import CORETYPE_REMEDY, REMEDY, openblas_fallback, reference_blas
    if _BLAS_WARNED:
        return
    path = reference_blas()
    if path:
        _BLAS_WARNED.append(path)
        log.warning("pt2rt.export: torch runs on the reference BLAS (%s): matrix products, and "
                    "with them this export, run about 10x slower than they could; %s", path,
                    REMEDY)
        return
    fallback = openblas_fallback()
    if fallback:
        _BLAS_WARNED.append(fallback[0])
        log.warning("pt2rt.export: OpenBLAS (%s) does not recognise this CPU and runs its %s "
                    "kernels: matrix products, and with them this export, run about 4x slower "
                    "than they could; %s", fallback[0], fallback[1], CORETYPE_REMEDY)


def export(model: torch.nn.Module, args: Any, kwargs: Optional[Dict[str, Any]] = None, *,
           train: bool = True, inference: bool = True, partitioner: str = "default",
           bundle_examples: bool = True, decompositions: Optional[Dict] = None,
           optimize_inference: bool = False, dynamic_shapes: Any = None,
           full_references: bool = False, float64_references: bool = True) -> ExportedArchive:
    """Captures ``model`` on the example inputs and builds the archive contents.

    Args:
        model: the module; its parameters' ``requires_grad`` decides what is trainable
            (frozen parameters get no gradient and no backward work).
        args, kwargs: example inputs, all tensors (flat user inputs ``Plain(i)``: positional
            first, then keyword ones in forward()'s parameter order). Inputs with
            ``requires_grad`` get ``Grad(of=Plain(i))`` outputs.
        train: export the forward and backward graphs (training mode).
        inference: export the inference graph (eval mode, no grad).
        partitioner: "default" or "min_cut" (functorch's default_partition /
            min_cut_rematerialization_partition).
        bundle_examples: store the inputs and eager references (program.fb ``examples``).
            Outputs and buffers are stored exactly; gradients as *sketches* (norm, sum, abs
            sum, max abs and 8 seeded random projections each, ``grad_sketch.py``: a few bytes
            per parameter instead of a copy of every gradient, as large as the weights).
        full_references: store every gradient reference in full instead of a sketch (the
            archive then grows by about the weights' size; ``verify`` compares gradients
            element by element, catching an error in a single element).
        float64_references: for a float32 model, also run the references in float64 and
            record how far each float32 reference is from it (schema 1.5; ``examples.py``):
            ``export-cli verify`` then judges a result that fails the plain tolerance against
            eager float32's own rounding (dynamo's ``same()`` rule), e.g. on CUDA. Costs one
            more eager forward + backward in float64 at export.
        decompositions: extra decompositions applied while tracing, a dict from ATen op
            (``torch.ops.aten.<op>.<overload>``, or a packet for all overloads) to a Python
            function, e.g. ``torch._decomp.get_decompositions([torch.ops.aten.addmm])``. Passed
            to ``make_fx(decomposition_table=...)`` on torch 1.13 and to
            ``aot_export_joint_with_descriptors(decompositions=...)`` on torch >= 2.9; they
            replace the op by what the function traces (ops on the proxy tensors), in every
            exported graph (on 1.13 the backward is what autograd derives from the original op).
        optimize_inference: run the semantics-preserving inference-graph passes of
            ``inference_passes`` (BatchNorm folded into the convolution / linear before it;
            the folded weights are computed in the graph from the current weights; the C++
            runtime caches them until a weight changes in ``LoadOptions::inference_only``
            loads, and recomputes them per call in loads that may train). Outputs then differ from eager
            by rounding (float32: ~1e-6 relative per folded layer). The training graphs are
            not affected. Program metadata ``inference_passes`` records what was applied.
        dynamic_shapes: torch.export's spec of dynamic dims: a dict keyed by forward()
            argument name, or a tuple/list in argument order, each entry None (static) or
            ``{dim_index: pt2rt.Dim}``, e.g. ``{"x": {0: pt2rt.Dim("batch", min=1, max=64)}}``
            (``dynamic.py``; ``torch.export.Dim`` accepted too). The archive then stores the
            symbols, their range constraints and symbolic sizes; the C++ runtime binds them
            per call. Both captures (torch 1.13 and >= 2.9); on torch 1.13 an op without a
            symbolic-shape rule raises ExportError naming it (exporter/README.md lists the
            models and constructs of each lane).

    Raises:
        ExportTypeError: not a Module, non-tensor inputs.
        ExportError: bad arguments (unknown partitioner, nothing to export, signature mismatch).
        CaptureError: the model cannot be traced (the message has the original error).
    """

    # Progress of a long export on logger "pt2rt.export" (INFO; `python -m pt2rt save` and
    # `export-cli save` show it).
    log = logging.getLogger("pt2rt.export")
    _warn_reference_blas(log)
    start = time.perf_counter()
    log.info("capturing %s with torch %s (%s)", type(model).__name__, torch.__version__,
             ", ".join(g for g, on in (("training graphs", train), ("inference graph", inference))
                       if on) or "no graphs")
    from .capture.capture import capture, check_model_type
    from .capture.examples import eager_example
    from .passes.run_bounds import warn_if_over_bounds
    from .format.serialize import build_program, write_program
    check_model_type(model)
    # as torch.export: None outputs allowed, Python scalar inputs specialized
    with none_outputs_dropped(model) as none_paths, \
            scalars_specialized(model, args, kwargs) as (args, kwargs, specialized):
        captured = capture(model, args, kwargs, train=train, inference=inference,
                           partitioner=partitioner, decompositions=decompositions,
                           optimize_inference=optimize_inference,
                           dynamic_shapes=dynamic_shapes)
        if none_paths:  # where forward() returned None (ArchiveModule puts it back)
            captured.metadata["none_outputs"] = json.dumps(none_paths)
        captured.metadata.update(specialized)
        log.info("captured %s in %.1f s", ", ".join(
            f"{g.role.name.lower()} ({_op_nodes(g)} nodes)" for g in captured.graphs),
            time.perf_counter() - start)
        examples = []
        if bundle_examples:
            log.info("running the eager references%s", " (float32 and float64)"
                     if float64_references else "")
            examples.append(eager_example(model, captured.weights, captured.signature,
                                          captured.example_inputs,
                                          train=train, inference=inference,
                                          train_run=captured.eager_train,
                                          eval_outputs=captured.eager_eval,
                                          full_references=full_references,
                                          float64=float64_references))
            log.info("eager references done at %.1f s", time.perf_counter() - start)
    program, blobs = build_program(captured, examples)
    program_fb = write_program(program)
    warn_if_over_bounds(program, len(program_fb) + sum(len(b) for _, b in blobs))
    return ExportedArchive(captured, program, program_fb, blobs)
