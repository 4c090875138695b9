"""AOTAutograd's descriptors (``meta['desc']``) -> pt2rt's ``InputDescriptor`` / ``OutputDescriptor``.

torch >= 2.9's ``aot_export_joint_with_descriptors`` puts an ``AOTInput`` on every placeholder
(``node.meta['desc']``) and a list of ``AOTOutput`` on the output node, and its partitioners
(``torch._functorch.partitioners``) keep them on the forward/backward graphs they cut out
(``SavedForBackwardsAOTOutput(i)`` for the activations). The classes live in
``torch._functorch._aot_autograd.descriptors``; this module maps each one to the schema kind of
the same meaning, field by field, recursively (``TangentAOTInput(output=PlainAOTOutput(idx=0))``
-> ``Tangent(output=Plain(0))``). Nothing is derived from positions.

The mapping is strict: the class is looked up by name and its dataclass fields must be exactly
the expected ones, so a descriptor class that a newer torch adds or extends is refused with a
``CaptureError`` naming it instead of being mapped approximately. Importing this module does not
import torch's private descriptor module (it works by class name), so it loads on torch 1.13.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Tuple

from .descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind
from .errors import CaptureError

# class name -> (schema kind, dataclass fields, builder from the object's field values)
_Rule = Tuple[Any, Tuple[str, ...], Callable[..., Any]]


def _inp(kind: InputKind) -> Callable[..., InputDescriptor]:
    return lambda: InputDescriptor(kind)


def _out(kind: OutputKind) -> Callable[..., OutputDescriptor]:
    return lambda: OutputDescriptor(kind)


_INPUTS: Dict[str, _Rule] = {
    "ParamAOTInput": (InputKind.Param, ("target",),
                      lambda target: InputDescriptor(InputKind.Param, fqn=target)),
    "BufferAOTInput": (InputKind.Buffer, ("target",),
                       lambda target: InputDescriptor(InputKind.Buffer, fqn=target)),
    "PlainAOTInput": (InputKind.Plain, ("idx",),
                      lambda idx: InputDescriptor(InputKind.Plain, idx=idx)),
    "TangentAOTInput": (InputKind.Tangent, ("output",),
                        lambda output: InputDescriptor(InputKind.Tangent,
                                                       output=output_descriptor(output))),
    "DummyAOTInput": (InputKind.Dummy, ("idx",),
                      lambda idx: InputDescriptor(InputKind.Dummy, idx=idx)),
    "SubclassGetAttrAOTInput": (
        InputKind.SubclassGetAttr, ("base", "attr"),
        lambda base, attr: InputDescriptor(InputKind.SubclassGetAttr,
                                           base=input_descriptor(base), attr=attr)),
    "SubclassSizeAOTInput": (
        InputKind.SubclassSize, ("base", "idx"),
        lambda base, idx: InputDescriptor(InputKind.SubclassSize, base=input_descriptor(base),
                                          idx=idx)),
    "SubclassStrideAOTInput": (
        InputKind.SubclassStride, ("base", "idx"),
        lambda base, idx: InputDescriptor(InputKind.SubclassStride,
                                          base=input_descriptor(base), idx=idx)),
    "ViewBaseAOTInput": (InputKind.ViewBase, ("base_of",),
                         lambda base_of: InputDescriptor(InputKind.ViewBase,
                                                         base=input_descriptor(base_of))),
    "SyntheticBaseAOTInput": (InputKind.SyntheticBase, ("base_of",),
                              lambda base_of: InputDescriptor(InputKind.SyntheticBase,
                                                              base=input_descriptor(base_of))),
    "PhiloxForwardSeedAOTInput": (InputKind.PhiloxForwardSeed, (),
                                  _inp(InputKind.PhiloxForwardSeed)),
    "PhiloxForwardBaseOffsetAOTInput": (InputKind.PhiloxForwardBaseOffset, (),
                                        _inp(InputKind.PhiloxForwardBaseOffset)),
    "PhiloxBackwardSeedAOTInput": (InputKind.PhiloxBackwardSeed, (),
                                   _inp(InputKind.PhiloxBackwardSeed)),
    "PhiloxBackwardBaseOffsetAOTInput": (InputKind.PhiloxBackwardBaseOffset, (),
                                         _inp(InputKind.PhiloxBackwardBaseOffset)),
    "ForwardTokenAOTInput": (InputKind.ForwardToken, ("idx",),
                             lambda idx: InputDescriptor(InputKind.ForwardToken, idx=idx)),
    "BackwardTokenAOTInput": (InputKind.BackwardToken, ("idx",),
                              lambda idx: InputDescriptor(InputKind.BackwardToken, idx=idx)),
}

_OUTPUTS: Dict[str, _Rule] = {
    "PlainAOTOutput": (OutputKind.Plain, ("idx",),
                       lambda idx: OutputDescriptor(OutputKind.Plain, idx=idx)),
    "GradAOTOutput": (OutputKind.Grad, ("grad_of",),
                      lambda grad_of: OutputDescriptor(OutputKind.Grad,
                                                       of=input_descriptor(grad_of))),
    "InputMutationAOTOutput": (
        OutputKind.InputMutation, ("mutated_input",),
        lambda mutated_input: OutputDescriptor(OutputKind.InputMutation,
                                               of=input_descriptor(mutated_input))),
    "IntermediateBaseAOTOutput": (
        OutputKind.IntermediateBase, ("base_of",),
        lambda base_of: OutputDescriptor(OutputKind.IntermediateBase,
                                         base=output_descriptor(base_of))),
    "MetadataMutationAOTOutput": (OutputKind.MetadataMutation, ("idx",),
                                  lambda idx: OutputDescriptor(OutputKind.MetadataMutation,
                                                               idx=idx)),
    "SavedForBackwardsAOTOutput": (OutputKind.Saved, ("idx",),
                                   lambda idx: OutputDescriptor(OutputKind.Saved, idx=idx)),
    "SavedForBackwardsNoVcCheckAOTOutput": (
        OutputKind.SavedNoVcCheck, ("idx",),
        lambda idx: OutputDescriptor(OutputKind.SavedNoVcCheck, idx=idx)),
    "PhiloxUpdatedForwardOffsetAOTOutput": (OutputKind.PhiloxUpdatedForwardOffset, (),
                                            _out(OutputKind.PhiloxUpdatedForwardOffset)),
    "PhiloxUpdatedBackwardOffsetAOTOutput": (OutputKind.PhiloxUpdatedBackwardOffset, (),
                                             _out(OutputKind.PhiloxUpdatedBackwardOffset)),
    "ForwardTokenAOTOutput": (OutputKind.ForwardToken, ("idx",),
                              lambda idx: OutputDescriptor(OutputKind.ForwardToken, idx=idx)),
    "BackwardTokenAOTOutput": (OutputKind.BackwardToken, ("idx",),
                               lambda idx: OutputDescriptor(OutputKind.BackwardToken, idx=idx)),
    "SubclassGetAttrAOTOutput": (
        OutputKind.SubclassGetAttr, ("base", "attr"),
        lambda base, attr: OutputDescriptor(OutputKind.SubclassGetAttr,
                                            base=output_descriptor(base), attr=attr)),
    "SubclassSizeAOTOutput": (
        OutputKind.SubclassSize, ("base", "idx"),
        lambda base, idx: OutputDescriptor(OutputKind.SubclassSize,
                                           base=output_descriptor(base), idx=idx)),
    "SubclassStrideAOTOutput": (
        OutputKind.SubclassStride, ("base", "idx"),
        lambda base, idx: OutputDescriptor(OutputKind.SubclassStride,
                                           base=output_descriptor(base), idx=idx)),
    "DummyAOTOutput": (OutputKind.Dummy, ("idx",),
                       lambda idx: OutputDescriptor(OutputKind.Dummy, idx=idx)),
}

# The AOTAutograd classes each schema kind comes from (for docs and tests).
AOT_INPUT_CLASSES = {rule[0]: name for name, rule in _INPUTS.items()}
AOT_OUTPUT_CLASSES = {rule[0]: name for name, rule in _OUTPUTS.items()}


def _convert(desc: Any, rules: Dict[str, _Rule], what: str):
    name = type(desc).__name__
    rule = rules.get(name)
    if rule is None or not dataclasses.is_dataclass(desc):
        raise CaptureError(f"pt2rt.export: AOTAutograd {what} descriptor {desc!r} "
                           f"({type(desc).__module__}.{name}) has no pt2rt equivalent")
    _, fields, build = rule
    actual = tuple(f.name for f in dataclasses.fields(desc))
    if actual != fields:
        raise CaptureError(f"pt2rt.export: AOTAutograd descriptor {name} has fields {actual}, "
                           f"pt2rt maps {fields}; refusing to map it approximately")
    return build(*(getattr(desc, f) for f in fields))


def input_descriptor(desc: Any) -> InputDescriptor:
    """The pt2rt InputDescriptor of an AOTAutograd ``AOTInput`` (recursively).

    Raises:
        CaptureError: an unknown descriptor class or one whose fields differ from the mapped
            ones (e.g. a newer torch's).
    """
    return _convert(desc, _INPUTS, "input")


def output_descriptor(desc: Any) -> OutputDescriptor:
    """The pt2rt OutputDescriptor of an AOTAutograd ``AOTOutput`` (recursively).

    Raises:
        CaptureError: as ``input_descriptor``.
    """
    return _convert(desc, _OUTPUTS, "output")
