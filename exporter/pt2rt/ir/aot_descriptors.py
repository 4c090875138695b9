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
from typing import Any, Dict, Tuple

from ..errors import CaptureError
from .descriptors import InputDescriptor, InputKind, OutputDescriptor, OutputKind

# class name -> (schema kind, the class's dataclass fields, in order)
_INPUTS: Dict[str, Tuple[InputKind, Tuple[str, ...]]] = {
    "ParamAOTInput": (InputKind.Param, ("target",)),
    "BufferAOTInput": (InputKind.Buffer, ("target",)),
    "PlainAOTInput": (InputKind.Plain, ("idx",)),
    "TangentAOTInput": (InputKind.Tangent, ("output",)),
    "DummyAOTInput": (InputKind.Dummy, ("idx",)),
    "SubclassGetAttrAOTInput": (InputKind.SubclassGetAttr, ("base", "attr")),
    "SubclassSizeAOTInput": (InputKind.SubclassSize, ("base", "idx")),
    "SubclassStrideAOTInput": (InputKind.SubclassStride, ("base", "idx")),
    "ViewBaseAOTInput": (InputKind.ViewBase, ("base_of",)),
    "SyntheticBaseAOTInput": (InputKind.SyntheticBase, ("base_of",)),
    "PhiloxForwardSeedAOTInput": (InputKind.PhiloxForwardSeed, ()),
    "PhiloxForwardBaseOffsetAOTInput": (InputKind.PhiloxForwardBaseOffset, ()),
    "PhiloxBackwardSeedAOTInput": (InputKind.PhiloxBackwardSeed, ()),
    "PhiloxBackwardBaseOffsetAOTInput": (InputKind.PhiloxBackwardBaseOffset, ()),
    "ForwardTokenAOTInput": (InputKind.ForwardToken, ("idx",)),
    "BackwardTokenAOTInput": (InputKind.BackwardToken, ("idx",)),
}

_OUTPUTS: Dict[str, Tuple[OutputKind, Tuple[str, ...]]] = {
    "PlainAOTOutput": (OutputKind.Plain, ("idx",)),
    "GradAOTOutput": (OutputKind.Grad, ("grad_of",)),
    "InputMutationAOTOutput": (OutputKind.InputMutation, ("mutated_input",)),
    "IntermediateBaseAOTOutput": (OutputKind.IntermediateBase, ("base_of",)),
    "MetadataMutationAOTOutput": (OutputKind.MetadataMutation, ("idx",)),
    "SavedForBackwardsAOTOutput": (OutputKind.Saved, ("idx",)),
    "SavedForBackwardsNoVcCheckAOTOutput": (OutputKind.SavedNoVcCheck, ("idx",)),
    "PhiloxUpdatedForwardOffsetAOTOutput": (OutputKind.PhiloxUpdatedForwardOffset, ()),
    "PhiloxUpdatedBackwardOffsetAOTOutput": (OutputKind.PhiloxUpdatedBackwardOffset, ()),
    "ForwardTokenAOTOutput": (OutputKind.ForwardToken, ("idx",)),
    "BackwardTokenAOTOutput": (OutputKind.BackwardToken, ("idx",)),
    "SubclassGetAttrAOTOutput": (OutputKind.SubclassGetAttr, ("base", "attr")),
    "SubclassSizeAOTOutput": (OutputKind.SubclassSize, ("base", "idx")),
    "SubclassStrideAOTOutput": (OutputKind.SubclassStride, ("base", "idx")),
    "DummyAOTOutput": (OutputKind.Dummy, ("idx",)),
}

# The AOTAutograd classes each schema kind comes from (for docs and tests).
AOT_INPUT_CLASSES = {kind: name for name, (kind, _) in _INPUTS.items()}
AOT_OUTPUT_CLASSES = {kind: name for name, (kind, _) in _OUTPUTS.items()}


def _fields(values: Dict[str, Any], output_side: bool) -> Dict[str, Any]:
    """AOTAutograd field values -> pt2rt descriptor fields. ``base``/``base_of`` name a
    descriptor of the same side (an input's base is an input), ``output`` an output,
    ``grad_of``/``mutated_input`` an input."""
    same_side = output_descriptor if output_side else input_descriptor
    out: Dict[str, Any] = {}
    for name, v in values.items():
        if name == "target":
            out["fqn"] = v
        elif name in ("idx", "attr"):
            out[name] = v
        elif name == "output":
            out["output"] = output_descriptor(v)
        elif name in ("grad_of", "mutated_input"):
            out["of"] = input_descriptor(v)
        else:  # base, base_of
            out["base"] = same_side(v)
    return out


def _convert(desc: Any, rules: Dict[str, Tuple[Any, Tuple[str, ...]]], output_side: bool):
    name = type(desc).__name__
    rule = rules.get(name)
    if rule is None or not dataclasses.is_dataclass(desc):
        raise CaptureError(f"pt2rt.export: AOTAutograd {'output' if output_side else 'input'} "
                           f"descriptor {desc!r} ({type(desc).__module__}.{name}) has no pt2rt "
                           "equivalent")
    kind, fields = rule
    actual = tuple(f.name for f in dataclasses.fields(desc))
    if actual != fields:
        raise CaptureError(f"pt2rt.export: AOTAutograd descriptor {name} has fields {actual}, "
                           f"pt2rt maps {fields}; refusing to map it approximately")
    values = _fields({f: getattr(desc, f) for f in fields}, output_side)
    return (OutputDescriptor if output_side else InputDescriptor)(kind, **values)


def input_descriptor(desc: Any) -> InputDescriptor:
    """The pt2rt InputDescriptor of an AOTAutograd ``AOTInput`` (recursively).

    Raises:
        CaptureError: an unknown descriptor class or one whose fields differ from the mapped
            ones (e.g. a newer torch's).
    """
    return _convert(desc, _INPUTS, False)


def output_descriptor(desc: Any) -> OutputDescriptor:
    """The pt2rt OutputDescriptor of an AOTAutograd ``AOTOutput`` (recursively).

    Raises:
        CaptureError: as ``input_descriptor``.
    """
    return _convert(desc, _OUTPUTS, True)
