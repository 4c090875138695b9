"""``pt2rt.load(path)``: decode a model.pt2 and run its graphs with the reference executor.

``LoadedArchive`` holds the decoded ``Program``, the weights as tensors (by FQN), the extra
files and the bundled examples, and offers:

* ``run_graph(role, {descriptor: tensor})`` — the generic entry: any stored graph, inputs and
  outputs bound by descriptor; Param/Buffer/Constant inputs default to the archive's weights;
* ``run_inference(*args, **kwargs)`` — the inference graph; returns the user outputs;
* ``run_forward(*args, **kwargs)`` / ``run_backward(saved, grad_outputs)`` — the training
  graphs;
* ``train_step(*args, grad_outputs=None, **kwargs)`` — forward + backward, as one eager
  training forward and ``autograd.grad`` would give: outputs, gradients by FQN (user inputs
  as ``"input:<i>"``), buffers after the step (InputMutation values applied);
* ``module()`` (``archive_module.py``): the archive as a ``torch.nn.Module``, like
  torch.export's ``ExportedProgram.module()``;
* ``signature`` (``signature.py``): names, dtypes and shapes (symbolic dims with their
  ranges) of the user inputs and outputs; ``named_outputs(outputs)`` pairs outputs with their
  names (``Program.output_names``).

The conveniences take their inputs like the original ``forward``: positionally and/or by
keyword (``forward()``'s parameter names), and check them against the signature before any
graph runs (``signature.InputError`` naming the input: unknown, missing or repeated names,
dtype, rank, a static size, a dynamic dim outside its range), as the C++ runtime does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence

import torch

from ..errors import FormatError
from ..ir import constants, dtypes, grad_sketch
from ..ir.descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from ..ir.graph_ir import GraphRole, WeightKind
from ..ir.program_ir import GradSketch, Graph, Program, TensorData, Weight
from ..ir.signature import Signature, signature
from .archive import ArchiveReader
from .deserialize import read_program
from .executor import GraphRunner

TensorMap = Dict[str, torch.Tensor]


def tensor_of(t: TensorData) -> torch.Tensor:
    """A bundled TensorData as a (fresh) tensor."""
    return dtypes.tensor_from_bytes(t.data, dtypes.to_dtype(t.dtype), list(t.sizes))


def _weight_tensor(w: Weight, data: bytes) -> torch.Tensor:
    dtype = dtypes.to_dtype(w.dtype)
    if len(data) != w.byte_length:
        raise FormatError(f"{w.entry}: {len(data)} bytes, Program says {w.byte_length}")
    if any(s < 0 for s in w.sizes) or any(s < 0 for s in w.strides) or w.storage_offset < 0 \
            or len(w.sizes) != len(w.strides):
        raise FormatError(f"{w.entry}: bad sizes {w.sizes} / strides {w.strides} / offset "
                          f"{w.storage_offset} of weight {w.fqn!r}")
    numel = 0 if any(s == 0 for s in w.sizes) else \
        w.storage_offset + 1 + sum((s - 1) * st for s, st in zip(w.sizes, w.strides))
    esize = dtypes.element_size(dtype)
    if numel * esize != len(data):
        raise FormatError(f"{w.entry}: {len(data)} bytes, but {dtype}{w.sizes} with strides "
                          f"{w.strides} needs {numel * esize}")
    flat = dtypes.tensor_from_bytes(data, dtype, [numel])
    t = flat.as_strided(w.sizes, w.strides, w.storage_offset) if numel else \
        torch.empty(w.sizes, dtype=dtype)
    if w.kind is WeightKind.Parameter:
        t.requires_grad_(w.requires_grad)
    return t


@dataclass
class ExampleTensors:
    """A bundled example with its references as tensors (references empty when absent)."""

    name: str
    inputs: List[torch.Tensor]
    has_references: bool = False
    outputs: List[torch.Tensor] = field(default_factory=list)
    train_outputs: List[torch.Tensor] = field(default_factory=list)
    grad_outputs: List[torch.Tensor] = field(default_factory=list)
    grads: TensorMap = field(default_factory=dict)        # full gradient references
    buffers: TensorMap = field(default_factory=dict)
    grad_sketches: Dict[str, GradSketch] = field(default_factory=dict)  # compact ones (1.2)
    grad_sketch_seed: int = 0

    def check_grads(self, grads: TensorMap) -> Dict[str, str]:
        """Compares ``grads`` (name -> gradient, e.g. ``TrainStep.grads``) with every gradient
        reference, full (``assert_close``) or sketched (``grad_sketch.check_tensor``); returns
        name -> problem for each mismatch or missing gradient (empty: all close)."""
        problems = {}
        for name, ref in self.grads.items():
            if name not in grads:
                problems[name] = "not produced"
                continue
            try:
                torch.testing.assert_close(grads[name], ref)
            except AssertionError as e:
                problems[name] = str(e).splitlines()[0]
        for name, sketch in self.grad_sketches.items():
            why = ("not produced" if name not in grads
                   else grad_sketch.check_tensor(grads[name], sketch, self.grad_sketch_seed))
            if why:
                problems[name] = why
        return problems


@dataclass
class ForwardResult:
    outputs: List[Optional[torch.Tensor]]    # user outputs, Plain(i) order
    mutations: TensorMap                     # FQN -> new buffer value (InputMutation)
    saved: Dict[int, torch.Tensor]           # Saved(k) -> activation


@dataclass
class TrainStep:
    outputs: List[Optional[torch.Tensor]]
    grads: TensorMap                         # FQN / "input:<i>" -> gradient (None omitted)
    buffers: TensorMap                       # every buffer after the step


class LoadedArchive:
    """A decoded archive; see the module docstring. Weights are plain CPU tensors owned by
    this object (parameters have requires_grad as recorded)."""

    def __init__(self, path: str):
        with ArchiveReader(path) as ar:
            ar.check_layout(constants.PROGRAM_ENTRY)
            self.program: Program = read_program(ar.read(constants.PROGRAM_ENTRY))
            self.weights: TensorMap = {}
            for w in self.program.weights:
                ar.check_layout(w.entry)
                self.weights[w.fqn] = _weight_tensor(w, ar.read(w.entry))
            self.extra: Dict[str, bytes] = ar.extra()
            self.entries: List[str] = ar.names()
        self.path = path
        names = self.program.metadata.get("input_names", "")
        self.input_names: List[str] = names.split(",") if names else []
        self.runners_: Dict[GraphRole, GraphRunner] = {}
        self.signature: Signature = signature(self.program)

    # -- graphs -------------------------------------------------------------------------
    def graph(self, role: GraphRole) -> Graph:
        g = self.program.graph(role)
        if g is None:
            raise KeyError(f"pt2rt: {self.path} has no {role.name} graph")
        return g

    def _runner(self, role: GraphRole) -> GraphRunner:
        if role not in self.runners_:
            self.runners_[role] = GraphRunner(self.program, self.graph(role))
        return self.runners_[role]

    def weight_inputs(self) -> Dict[InputDescriptor, torch.Tensor]:
        out: Dict[InputDescriptor, torch.Tensor] = {}
        for w in self.program.weights:
            ctor = {WeightKind.Parameter: InputDescriptor.param,
                    WeightKind.Buffer: InputDescriptor.buffer,
                    WeightKind.Constant: InputDescriptor.constant}[w.kind]
            out[ctor(w.fqn)] = self.weights[w.fqn].detach()
        return out

    def run_graph(self, role: GraphRole, inputs: Mapping[InputDescriptor, torch.Tensor]
                  ) -> Dict[OutputDescriptor, Optional[torch.Tensor]]:
        """Runs the ``role`` graph; weight inputs not in ``inputs`` come from the archive."""
        bound = self.weight_inputs()
        bound.update(inputs)
        with torch.no_grad():
            return self._runner(role).run(bound)

    # -- conveniences -------------------------------------------------------------------
    @staticmethod
    def _plain(inputs: Sequence[torch.Tensor]) -> Dict[InputDescriptor, torch.Tensor]:
        return {InputDescriptor.plain(i): x for i, x in enumerate(inputs)}

    @staticmethod
    def _user_outputs(outs: Mapping[OutputDescriptor, Optional[torch.Tensor]]):
        plain = sorted((d.idx, t) for d, t in outs.items() if d.kind is OutputKind.Plain)
        return [t for _, t in plain]

    def user_inputs(self, args: Sequence[torch.Tensor], kwargs: Mapping[str, torch.Tensor]
                    ) -> List[torch.Tensor]:
        """``forward``-style arguments -> the checked flat user inputs (``Plain(i)`` order).

        Raises:
            signature.InputError: naming the input (see the module docstring).
        """
        inputs = self.signature.bind(args, kwargs)
        self.signature.check(inputs)
        return inputs

    def named_outputs(self, outputs: Sequence[Optional[torch.Tensor]]
                      ) -> Dict[str, Optional[torch.Tensor]]:
        """User outputs keyed by their names (``['logits']``, ``[1]``, ``output``)."""
        return {spec.name: t for spec, t in zip(self.signature.outputs, outputs)}

    def run_inference(self, *args: torch.Tensor, **kwargs: torch.Tensor
                      ) -> List[Optional[torch.Tensor]]:
        inputs = self.user_inputs(args, kwargs)
        return self._user_outputs(self.run_graph(GraphRole.Inference, self._plain(inputs)))

    def run_forward(self, *args: torch.Tensor, **kwargs: torch.Tensor) -> ForwardResult:
        inputs = self.user_inputs(args, kwargs)
        outs = self.run_graph(GraphRole.Forward, self._plain(inputs))
        return ForwardResult(
            outputs=self._user_outputs(outs),
            mutations={d.of.fqn: t for d, t in outs.items()
                       if d.kind is OutputKind.InputMutation and d.of.kind is InputKind.Buffer},
            saved={d.idx: t for d, t in outs.items() if d.is_saved()})

    def run_backward(self, saved: Mapping[int, torch.Tensor],
                     grad_outputs: Sequence[Optional[torch.Tensor]],
                     outputs: Optional[Sequence[Optional[torch.Tensor]]] = None) -> TensorMap:
        """``grad_outputs[i]`` is the cotangent of user output i (None -> zeros, which needs
        ``outputs`` for the shape). Returns gradients by FQN / "input:<i>"."""
        bw = self.graph(GraphRole.Backward)
        inputs: Dict[InputDescriptor, torch.Tensor] = {}
        for gi in bw.inputs:
            d = gi.descriptor
            if d.kind is InputKind.Saved:
                inputs[d] = saved[d.idx]
            elif d.kind is InputKind.Tangent:
                g = grad_outputs[d.output.idx]
                if g is None:
                    if outputs is None:
                        raise ValueError(f"pt2rt: grad_outputs[{d.output.idx}] is None; pass "
                                         "outputs= so zeros of its shape can be used")
                    g = torch.zeros_like(outputs[d.output.idx])
                inputs[d] = g
        grads = self.run_graph(GraphRole.Backward, inputs)
        out: TensorMap = {}
        for d, t in grads.items():
            if d.kind is OutputKind.Grad and t is not None:
                key = d.of.fqn if d.of.kind is not InputKind.Plain else f"input:{d.of.idx}"
                out[key] = t
        return out

    def train_step(self, *args: torch.Tensor,
                   grad_outputs: Optional[Sequence[Optional[torch.Tensor]]] = None,
                   apply_buffers: bool = False, **kwargs: torch.Tensor) -> TrainStep:
        """One training forward + backward. ``grad_outputs`` default: ones for every
        differentiable output. ``apply_buffers``: also store the new buffers in ``weights``."""
        fwd = self.run_forward(*args, **kwargs)
        if grad_outputs is None:
            tangents = {gi.descriptor.output.idx for gi in self.graph(GraphRole.Backward).inputs
                        if gi.descriptor.kind is InputKind.Tangent}
            grad_outputs = [torch.ones_like(o) if i in tangents else None
                            for i, o in enumerate(fwd.outputs)]
        grads = self.run_backward(fwd.saved, grad_outputs, fwd.outputs)
        buffers = {w.fqn: self.weights[w.fqn] for w in self.program.weights
                   if w.kind is WeightKind.Buffer}
        buffers.update(fwd.mutations)
        if apply_buffers:
            with torch.no_grad():
                for fqn, t in fwd.mutations.items():
                    self.weights[fqn].copy_(t)
        return TrainStep(fwd.outputs, grads, buffers)

    def examples(self) -> List[ExampleTensors]:
        out = []
        for e in self.program.examples:
            ex = ExampleTensors(e.name, [tensor_of(t) for t in e.inputs])
            r = e.references
            if r is not None:
                ex.has_references = True
                ex.outputs = [tensor_of(t) for t in r.outputs]
                ex.train_outputs = [tensor_of(t) for t in r.train_outputs]
                ex.grad_outputs = [tensor_of(t) for t in r.grad_outputs]
                ex.grads = {n: tensor_of(t) for n, t in r.grads}
                ex.buffers = {n: tensor_of(t) for n, t in r.buffers}
                ex.grad_sketches = {s.name: s for s in r.grad_sketches}
                ex.grad_sketch_seed = r.grad_sketch_seed
            out.append(ex)
        return out

    def module(self) -> "ArchiveModule":
        """The archive as a ``torch.nn.Module`` (``archive_module.py``; torch.export's
        ``ExportedProgram.module()``): original input and output structure, weights at their
        FQNs, eval() the inference graph, train() the forward graph with the backward graph as
        its autograd backward. The module owns this archive's weight tensors from then on."""
        from .archive_module import ArchiveModule
        return ArchiveModule(self)

    def summary(self) -> str:
        """A short human-readable description (graphs, node counts, weights, bytes)."""
        import os
        lines = [f"{self.path}: {os.path.getsize(self.path)} bytes, schema "
                 f"{self.program.schema_major}.{self.program.schema_minor}, exported by pt2rt "
                 f"{self.program.producer.exporter_version} with torch "
                 f"{self.program.producer.torch_version} ({self.program.producer.capture})"]
        for g in self.program.graphs:
            kinds: Dict[str, int] = {}
            for gi in g.inputs:
                kinds[gi.descriptor.kind.name] = kinds.get(gi.descriptor.kind.name, 0) + 1
            okinds: Dict[str, int] = {}
            for go in g.outputs:
                okinds[go.descriptor.kind.name] = okinds.get(go.descriptor.kind.name, 0) + 1
            lines.append(f"  graph {g.role.name}: {len(g.nodes)} nodes, {len(g.values)} values; "
                         f"inputs {kinds}; outputs {okinds}")
        nbytes = sum(w.byte_length for w in self.program.weights)
        by_kind: Dict[str, int] = {}
        for w in self.program.weights:
            by_kind[w.kind.name] = by_kind.get(w.kind.name, 0) + 1
        lines.append(f"  weights: {len(self.program.weights)} {by_kind}, {nbytes} bytes")
        lines.append(f"  operators: {len(self.program.operators)}; examples: "
                     f"{len(self.program.examples)}; extra: {sorted(self.extra)}")
        return "\n".join(lines)


def load(path: str) -> LoadedArchive:
    """Decodes the archive at ``path``.

    Raises:
        FormatError: not a pt2rt archive, wrong version, missing/compressed/misaligned entry,
            weight bytes that do not match their metadata, undecodable program.fb.
    """
    return LoadedArchive(path)
