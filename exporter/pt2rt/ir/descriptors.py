"""Graph input/output descriptors: what each placeholder and each output of a graph means.

Mirrors AOTAutograd's ``AOTInput`` / ``AOTOutput`` (``torch._functorch._aot_autograd.descriptors``
in torch >= 2.9) and the ``InputDescriptor`` / ``OutputDescriptor`` tables of schema/pt2rt.fbs.
The calling convention of every pt2rt graph is given by these descriptors, never by position.

Descriptors are frozen (hashable) dataclasses, so they can key dictionaries:
``{InputDescriptor.param("fc.weight"): tensor}``. ``str()`` gives AOTAutograd's spelling, e.g.
``ParamAOTInput(target='fc.weight')``. The enum numbering equals the schema's (a test checks it).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional


class InputKind(enum.IntEnum):
    """schema ``InputKind``."""

    Unknown = 0
    Param = 1
    Buffer = 2
    Plain = 3
    Tangent = 4
    Saved = 5
    Constant = 6
    PhiloxForwardSeed = 7
    PhiloxForwardBaseOffset = 8
    PhiloxBackwardSeed = 9
    PhiloxBackwardBaseOffset = 10
    ForwardToken = 11
    BackwardToken = 12
    SubclassGetAttr = 13
    SubclassSize = 14
    SubclassStride = 15
    ViewBase = 16
    SyntheticBase = 17
    Dummy = 18


class OutputKind(enum.IntEnum):
    """schema ``OutputKind``."""

    Unknown = 0
    Plain = 1
    Grad = 2
    InputMutation = 3
    Saved = 4
    IntermediateBase = 5
    ForwardToken = 6
    BackwardToken = 7
    PhiloxUpdatedForwardOffset = 8
    PhiloxUpdatedBackwardOffset = 9
    SubclassGetAttr = 10
    SubclassSize = 11
    SubclassStride = 12
    Dummy = 13
    MetadataMutation = 14      # schema 1.1
    SavedNoVcCheck = 15        # schema 1.1


# AOTAutograd class names, for str(); kinds absent here print as "<Kind>AOTInput".
_INPUT_NAMES = {
    InputKind.Param: "ParamAOTInput", InputKind.Buffer: "BufferAOTInput",
    InputKind.Plain: "PlainAOTInput", InputKind.Tangent: "TangentAOTInput",
    InputKind.Saved: "SavedForBackwardsAOTInput", InputKind.Constant: "ConstantAOTInput",
}
_OUTPUT_NAMES = {
    OutputKind.Plain: "PlainAOTOutput", OutputKind.Grad: "GradAOTOutput",
    OutputKind.InputMutation: "InputMutationAOTOutput",
    OutputKind.Saved: "SavedForBackwardsAOTOutput",
    OutputKind.IntermediateBase: "IntermediateBaseAOTOutput",
    OutputKind.SavedNoVcCheck: "SavedForBackwardsNoVcCheckAOTOutput",
}


@dataclass(frozen=True)
class InputDescriptor:
    """AOTInput: where a graph input comes from. Meaningful fields depend on ``kind``:
    ``fqn`` (Param, Buffer, Constant), ``idx`` (Plain, Saved, tokens, Subclass*, Dummy),
    ``output`` (Tangent: the forward output this is the cotangent of), ``base`` (Subclass*,
    ViewBase, SyntheticBase), ``attr`` (SubclassGetAttr)."""

    kind: InputKind
    fqn: str = ""
    idx: int = 0
    output: Optional["OutputDescriptor"] = None
    base: Optional["InputDescriptor"] = None
    attr: str = ""

    @staticmethod
    def param(fqn: str) -> "InputDescriptor":
        return InputDescriptor(InputKind.Param, fqn=fqn)

    @staticmethod
    def buffer(fqn: str) -> "InputDescriptor":
        return InputDescriptor(InputKind.Buffer, fqn=fqn)

    @staticmethod
    def constant(fqn: str) -> "InputDescriptor":
        return InputDescriptor(InputKind.Constant, fqn=fqn)

    @staticmethod
    def plain(idx: int) -> "InputDescriptor":
        return InputDescriptor(InputKind.Plain, idx=idx)

    @staticmethod
    def tangent(output: "OutputDescriptor") -> "InputDescriptor":
        return InputDescriptor(InputKind.Tangent, output=output)

    @staticmethod
    def saved(idx: int) -> "InputDescriptor":
        return InputDescriptor(InputKind.Saved, idx=idx)

    def __str__(self) -> str:
        k = self.kind
        name = _INPUT_NAMES.get(k, f"{k.name}AOTInput")
        if k in (InputKind.Param, InputKind.Buffer, InputKind.Constant):
            return f"{name}(target={self.fqn!r})"
        if k is InputKind.Tangent:
            return f"{name}(output={self.output})"
        if k is InputKind.SubclassGetAttr:
            return f"{name}(base={self.base}, attr={self.attr!r})"
        if k in (InputKind.SubclassSize, InputKind.SubclassStride):
            return f"{name}(base={self.base}, idx={self.idx})"
        if k in (InputKind.ViewBase, InputKind.SyntheticBase):
            return f"{name}(base_of={self.base})"
        if k in (InputKind.Plain, InputKind.Saved, InputKind.ForwardToken,
                 InputKind.BackwardToken, InputKind.Dummy):
            return f"{name}(idx={self.idx})"
        return f"{name}()"


@dataclass(frozen=True)
class OutputDescriptor:
    """AOTOutput: what a graph output is. ``idx`` (Plain, Saved, tokens, Subclass*, Dummy),
    ``of`` (Grad, InputMutation: the input concerned), ``base`` (IntermediateBase, Subclass*),
    ``attr`` (SubclassGetAttr)."""

    kind: OutputKind
    idx: int = 0
    of: Optional[InputDescriptor] = None
    base: Optional["OutputDescriptor"] = None
    attr: str = ""

    @staticmethod
    def plain(idx: int) -> "OutputDescriptor":
        return OutputDescriptor(OutputKind.Plain, idx=idx)

    @staticmethod
    def grad(of: InputDescriptor) -> "OutputDescriptor":
        return OutputDescriptor(OutputKind.Grad, of=of)

    @staticmethod
    def input_mutation(of: InputDescriptor) -> "OutputDescriptor":
        return OutputDescriptor(OutputKind.InputMutation, of=of)

    @staticmethod
    def saved(idx: int) -> "OutputDescriptor":
        return OutputDescriptor(OutputKind.Saved, idx=idx)

    def is_saved(self) -> bool:
        """Saved(k) or SavedNoVcCheck(k): the forward output the backward reads as Saved(k)."""
        return self.kind in (OutputKind.Saved, OutputKind.SavedNoVcCheck)

    def __str__(self) -> str:
        k = self.kind
        name = _OUTPUT_NAMES.get(k, f"{k.name}AOTOutput")
        if k is OutputKind.Grad:
            return f"{name}(grad_of={self.of})"
        if k is OutputKind.InputMutation:
            return f"{name}(mutated_input={self.of})"
        if k is OutputKind.IntermediateBase:
            return f"{name}(base_of={self.base})"
        if k is OutputKind.SubclassGetAttr:
            return f"{name}(base={self.base}, attr={self.attr!r})"
        if k in (OutputKind.SubclassSize, OutputKind.SubclassStride):
            return f"{name}(base={self.base}, idx={self.idx})"
        if k in (OutputKind.Plain, OutputKind.Saved, OutputKind.ForwardToken,
                 OutputKind.BackwardToken, OutputKind.Dummy, OutputKind.MetadataMutation,
                 OutputKind.SavedNoVcCheck):
            return f"{name}(idx={self.idx})"
        return f"{name}()"
