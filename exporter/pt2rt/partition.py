"""Joint graph -> forward graph + backward graph, with descriptors.

Uses functorch.compile's partitioners (torch 1.13): ``default_partition`` (the forward holds
what lies between the primals and the forward outputs; everything it computed that backward
needs is saved) or ``min_cut_rematerialization_partition`` (a min cut over activation bytes
decides what to save and what cheap pointwise work backward recomputes; needs networkx).

Both return ``fw(primals...) -> (*fwd_outputs, *saved)`` and
``bw(*saved, *tangents) -> bwd_outputs``, where the backward placeholders of saved values keep
the names of the forward nodes they come from. Descriptors are derived from that:

* forward inputs: the joint's primals, matched by placeholder name (``primals_<n>``);
* forward outputs: the first ``num_fwd_outputs`` are the joint's (Plain, InputMutation), the
  k-th of the rest is ``Saved(k)``;
* backward inputs: a placeholder named like the k-th saved forward output is ``Saved(k)``, a
  ``tangents_<n>`` placeholder keeps its joint ``Tangent`` descriptor;
* backward outputs: the joint's outputs after ``num_fwd_outputs`` (``Grad(of=...)``), in the
  same order; ``None`` stays ``None`` (an unused gradient).
"""
from __future__ import annotations

import copy
from typing import Dict, List, Tuple

import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from .descriptors import InputDescriptor, OutputDescriptor
from .errors import ExportError
from .graph_ir import CapturedJoint, DescribedGraph, GraphRole

PARTITIONERS = ("default", "min_cut")


def _partitioner(name: str):
    from functorch.compile import default_partition, min_cut_rematerialization_partition
    if name == "default":
        return default_partition
    if name == "min_cut":
        return min_cut_rematerialization_partition
    raise ExportError(f"pt2rt.export: unknown partitioner {name!r}; expected one of "
                      f"{', '.join(PARTITIONERS)}")


def _outputs(gm: fx.GraphModule) -> List:
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return pytree.tree_flatten(out.args)[0]


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
    n_out = len(jg.outputs)
    nf = joint.num_fwd_outputs
    # functorch's partitioners read the forward/backward split from the output pytree spec.
    gm._out_spec = pytree.tree_flatten((list(range(nf)), list(range(n_out - nf))))[1]
    joint_inputs = {n.name: d for n, d in zip(jg.placeholders(), jg.inputs)}

    with torch.no_grad():
        fw, bw = fn(gm, None)

    fw_ph = [n for n in fw.graph.nodes if n.op == "placeholder"]
    fw_in = [joint_inputs[n.name] for n in fw_ph]
    fw_outs = _outputs(fw)
    saved_names: Dict[str, int] = {}
    fw_out_desc: List[OutputDescriptor] = list(jg.outputs[:nf])
    for k, node in enumerate(fw_outs[nf:]):
        assert isinstance(node, fx.Node), node
        saved_names[node.name] = k
        fw_out_desc.append(OutputDescriptor.saved(k))

    bw_in: List[InputDescriptor] = []
    for n in bw.graph.nodes:
        if n.op != "placeholder":
            continue
        if n.name in saved_names:
            bw_in.append(InputDescriptor.saved(saved_names[n.name]))
        else:
            bw_in.append(joint_inputs[n.name])
    bw_out_desc = list(jg.outputs[nf:])

    fwd = DescribedGraph(GraphRole.Forward, fw, fw_in, fw_out_desc)
    bwd = DescribedGraph(GraphRole.Backward, bw, bw_in, bw_out_desc)
    fwd.check()
    bwd.check()
    return fwd, bwd
