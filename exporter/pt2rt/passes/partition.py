"""Joint graph -> forward graph + backward graph, with descriptors.

Uses functorch's partitioners (``functorch.compile`` on torch 1.13,
``torch._functorch.partitioners`` on torch 2.x): ``default_partition`` (the forward holds what
lies between the primals and the forward outputs; everything it computed that backward needs
is saved) or ``min_cut_rematerialization_partition`` (a min cut over activation bytes decides
what to save and what cheap pointwise work backward recomputes; needs networkx).

Both return ``fw(primals...) -> (*fwd_outputs, *saved)`` and
``bw(*saved, *tangents) -> bwd_outputs``, where the backward placeholders of saved values keep
the names of the forward nodes they come from. The version seam is ``_run_partitioner``: 1.13
reads the forward/backward split from the joint's output pytree spec, 2.x takes
``num_fwd_outputs=``. Descriptors:

* forward inputs: the joint's primals, matched by placeholder name;
* forward outputs: the first ``num_fwd_outputs`` are the joint's (Plain, InputMutation, ...);
  the k-th of the rest is ``Saved(k)``. On torch 2.x the partitioner labels those itself
  (``SavedForBackwardsAOTOutput(k)`` / ``SavedForBackwardsNoVcCheckAOTOutput(k)`` in the
  forward output node's ``meta['desc']``): the labels are mapped and checked against the
  joint's descriptors and the position;
* backward inputs: a placeholder named like the k-th saved forward output is ``Saved(k)`` (the
  same node, so the same k on both sides); every other one keeps its joint descriptor
  (``Tangent``, backward Philox seed/offset, backward tokens);
* backward outputs: the joint's outputs after ``num_fwd_outputs`` (``Grad(of=...)``), in the
  same order; ``None`` stays ``None`` (an unused gradient).
"""
from __future__ import annotations

import copy
import inspect
from typing import Dict, List, Tuple

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from ..errors import ExportError
from ..ir import aot_descriptors
from ..ir.descriptors import InputDescriptor, OutputDescriptor
from ..ir.graph_ir import CapturedJoint, DescribedGraph, GraphRole

PARTITIONERS = ("default", "min_cut")


def _partitioner(name: str):
    try:
        from torch._functorch.partitioners import (default_partition,
                                                   min_cut_rematerialization_partition)
    except ImportError:  # torch 1.13
        from functorch.compile import default_partition, min_cut_rematerialization_partition
    if name == "default":
        return default_partition
    if name == "min_cut":
        return min_cut_rematerialization_partition
    raise ExportError(f"pt2rt.export: unknown partitioner {name!r}; expected one of "
                      f"{', '.join(PARTITIONERS)}")


def _output_node(gm: fx.GraphModule) -> fx.Node:
    return next(n for n in reversed(gm.graph.nodes) if n.op == "output")


def _outputs(gm: fx.GraphModule) -> List:
    return pytree.tree_flatten(_output_node(gm).args)[0]


def _run_partitioner(fn, gm: fx.GraphModule, num_fwd: int, num_out: int):
    """The version seam: torch 2.x's partitioners take ``num_fwd_outputs``; 1.13's read the
    split from the output pytree spec (``gm._out_spec``)."""
    if "num_fwd_outputs" in inspect.signature(fn).parameters:
        return fn(gm, None, num_fwd_outputs=num_fwd)
    gm._out_spec = pytree.tree_flatten((list(range(num_fwd)),
                                        list(range(num_out - num_fwd))))[1]
    # A symbolic (dynamic-shape) trace's SymInt nodes (aten.sym_size, operator.mul ...) carry no
    # tensor_meta; 1.13's default partitioner takes such a node for a tuple producer and asserts
    # its users are getitems. Marked, they are saved like tensors (as torch 2 saves SymInts).
    from ..ir.symbols import is_symint
    for node in gm.graph.nodes:
        if "tensor_meta" not in node.meta and is_symint(node.meta.get("val")):
            node.meta["tensor_meta"] = None
    # functorch 1.13's min-cut sizes tensors from a dtype table without the complex types
    # (NotImplementedError "Don't know the size of dtype"); torch 2.x uses element_size().
    import functorch._src.partitioners as p113
    table_size_of = p113._size_of
    p113._size_of = _size_of
    try:
        return fn(gm, None)
    finally:
        p113._size_of = table_size_of


def _joint_order_of_saved(joint_gm: fx.GraphModule, fw: fx.GraphModule, bw: fx.GraphModule,
                          num_fwd: int) -> None:
    """Puts the saved values in the joint graph's node order, in place: the forward's outputs
    after the first ``num_fwd`` and, in the slots they occupy, the backward's placeholders.

    functorch 1.13's partitioners collect saved values in Python sets of ``fx.Node`` (hashed by
    object identity), so their order, and with it ``Saved(k)`` numbering and the archive's
    bytes, changed from one export of the same model to the next. torch 2.x's partitioners
    already order them (and label them), so this runs only for 1.13. Values, graphs and
    descriptors are unchanged; only the numbering k of ``Saved(k)`` becomes reproducible.
    """
    out = _output_node(fw)
    flat = list(out.args[0]) if len(out.args) == 1 and isinstance(out.args[0], (tuple, list)) \
        else None
    if flat is None or len(flat) != len(_outputs(fw)):  # not a flat tuple: leave it alone
        return
    position = {n.name: i for i, n in enumerate(joint_gm.graph.nodes)}
    saved = flat[num_fwd:]
    if not all(isinstance(n, fx.Node) for n in saved):
        return  # partition() names the non-node value
    ordered = sorted(saved, key=lambda n: (position.get(n.name, len(position)), n.name))
    out.args = (type(out.args[0])(flat[:num_fwd] + ordered),)
    rank = {n.name: k for k, n in enumerate(ordered)}
    placeholders = [n for n in bw.graph.nodes if n.op == "placeholder"]
    slots = [i for i, n in enumerate(placeholders) if n.name in rank]
    by_k = sorted((placeholders[i] for i in slots), key=lambda n: rank[n.name])
    for i, node in zip(slots, by_k):
        placeholders[i] = node
    for node in reversed(placeholders):  # each moved to the front: the list's order results
        first = next(iter(bw.graph.nodes))
        if node is not first:
            first.prepend(node)
    fw.recompile()
    bw.recompile()


def _size_of(meta) -> int:
    """Bytes of a tensor from its ``tensor_meta`` (any dtype). A symbolic size (dynamic shapes)
    counts at its example value, as torch 2's min-cut sizes it (``hint_int``): the cut is a
    memory heuristic, it does not change what the graphs compute. A SymInt (``tensor_meta``
    None, see ``_run_partitioner``) counts as one int64."""
    if meta is None:
        return 8
    n = torch.empty((), dtype=meta.dtype).element_size()
    for x in meta.shape:
        n *= _size_hint(x)
    return n


def _size_hint(x) -> int:
    if isinstance(x, int):
        return x
    node = x.get_pyobj() if hasattr(x, "get_pyobj") else x  # torch 1.13: SymIntNode -> PySymInt
    return int(node.shape_env.size_hint(node.expr))


def _saved_descriptor(k: int, node: fx.Node, label) -> OutputDescriptor:
    """Saved(k), or the partitioner's own label for it mapped (torch 2.x), checked."""
    if label is None:
        return OutputDescriptor.saved(k)
    d = aot_descriptors.output_descriptor(label)
    if not d.is_saved() or d.idx != k:
        raise ExportError(f"pt2rt: the partitioner labels saved value {k} ({node.name}) {label}")
    return d


def partition(joint: CapturedJoint, partitioner: str = "default"
              ) -> Tuple[DescribedGraph, DescribedGraph]:
    """Splits ``joint`` into (forward, backward) DescribedGraphs; see the module docstring.

    The joint is not modified (the partitioners mutate their input, so they get a copy).

    Raises:
        ExportError: unknown ``partitioner``.
    """
    fn = _partitioner(partitioner)
    jg = joint.graph
    gm = copy.deepcopy(jg.module)
    nf = joint.num_fwd_outputs
    joint_inputs = {n.name: d for n, d in zip(jg.placeholders(), jg.inputs)}

    with torch.no_grad():
        fw, bw = _run_partitioner(fn, gm, nf, len(jg.outputs))

    labels = _output_node(fw).meta.get("desc")  # torch 2.x: the partitioner's descriptors
    if labels is None:
        _joint_order_of_saved(jg.module, fw, bw, nf)
    fw_ph = [n for n in fw.graph.nodes if n.op == "placeholder"]
    fw_in = [joint_inputs[n.name] for n in fw_ph]
    fw_outs = _outputs(fw)
    if labels is not None:
        if len(labels) != len(fw_outs) or [aot_descriptors.output_descriptor(d)
                                           for d in labels[:nf]] != list(jg.outputs[:nf]):
            raise ExportError("pt2rt: the partitioner's forward output descriptors do not "
                              "match the joint graph's")
    saved_names: Dict[str, int] = {}
    fw_out_desc: List[OutputDescriptor] = list(jg.outputs[:nf])
    for k, node in enumerate(fw_outs[nf:]):
        if not isinstance(node, fx.Node):
            raise ExportError(f"pt2rt: the partitioner saves a non-node value {node!r}")
        saved_names[node.name] = k
        fw_out_desc.append(_saved_descriptor(k, node, labels[nf + k] if labels else None))

    bw_in: List[InputDescriptor] = []
    for n in bw.graph.nodes:
        if n.op != "placeholder":
            continue
        if n.name in saved_names:
            bw_in.append(InputDescriptor.saved(saved_names[n.name]))
        elif n.name in joint_inputs:
            bw_in.append(joint_inputs[n.name])
        else:
            raise ExportError(f"pt2rt: backward input {n.name} is neither a saved forward "
                              "value nor a joint graph input")
    bw_out_desc = list(jg.outputs[nf:])
    bw_labels = _output_node(bw).meta.get("desc")
    if bw_labels is not None and [aot_descriptors.output_descriptor(d) if d is not None
                                  else None for d in bw_labels] != bw_out_desc:
        raise ExportError("pt2rt: the partitioner's backward output descriptors do not match "
                          "the joint graph's")

    fwd = DescribedGraph(GraphRole.Forward, fw, fw_in, fw_out_desc)
    bwd = DescribedGraph(GraphRole.Backward, bw, bw_in, bw_out_desc)
    fwd.check()
    bwd.check()
    return fwd, bwd
