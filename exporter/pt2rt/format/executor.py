"""Reference executor: run a decoded ``program_ir.Graph`` with torch ops in Python.

The check of the format before any C++ exists, and a debugging tool after. Each node's op is
looked up as ``torch.ops.<namespace>.<name>.<overload or "default">``; arguments are converted
back to Python values (positional in order, kwarg_only by name; omitted trailing arguments take
the schema defaults of the running torch); ``prim::getitem`` indexes a TensorList value and
``sym::`` ops (dynamic shapes) compute on Python ints; ``pt2rt::lstm`` /
``pt2rt::lstm_backward`` are rnn_ops.py's dispatcher ops, ``pt2rt::scaled_dot_product_attention``
attention_ops.py's.
Graph inputs and outputs are bound by descriptor, never by position.

Errors: ``ExecutionError`` names the node (FX name, op, module), each tensor argument's dtype,
shape and device, and the stack trace recorded at export.
"""
from __future__ import annotations

import operator
from typing import Any, Dict, List, Mapping, Optional

import torch

from ..ir import dtypes
from ..ir.descriptors import InputDescriptor, OutputDescriptor
from ..ir.program_ir import ArgKind, Argument, Graph, Node, Operator, Program


class ExecutionError(RuntimeError):
    """A node of a stored graph failed; the message names the node and its arguments."""


# pt2rt's own SymInt ops (lower.py; C++: runtime/kernels/native_ops.cpp) on Python ints: the size
# queries and arithmetic of dynamic-shape archives.
SYM_KERNELS = {
    "sym::size": lambda t, d: t.size(d), "sym::stride": lambda t, d: t.stride(d),
    "sym::numel": lambda t: t.numel(), "sym::storage_offset": lambda t: t.storage_offset(),
    "sym::add": operator.add, "sym::sub": operator.sub, "sym::mul": operator.mul,
    "sym::floordiv": operator.floordiv, "sym::mod": operator.mod, "sym::neg": operator.neg,
    "sym::max": max, "sym::min": min,
}


def resolve_op(op: Operator):
    """The torch op overload (or pt2rt ``sym::`` kernel) for ``op``, or raises
    ExecutionError naming it."""
    if op.name in SYM_KERNELS:
        return SYM_KERNELS[op.name]
    ns, _, name = op.name.partition("::")
    if ns == "pt2rt":  # pt2rt's own dispatcher ops (rnn_ops.py, attention_ops.py, ctc_ops.py),
        from ..ops import attention_ops, ctc_ops, rnn_ops  # defined on first use
        rnn_ops.register()
        attention_ops.register()
        ctc_ops.register()
    try:
        packet = getattr(getattr(torch.ops, ns), name)
        return getattr(packet, op.overload or "default")
    except (AttributeError, RuntimeError) as e:
        raise ExecutionError(f"pt2rt: unknown op {op.qualified()} in torch {torch.__version__}"
                             ) from e


def _convert(a: Argument, env: List[Any]) -> Any:
    k, v = a.kind, a.value
    if k is ArgKind.NoneArg:
        return None
    if k in (ArgKind.TensorRef, ArgKind.TensorListRef, ArgKind.SymIntRef, ArgKind.SymFloatRef,
             ArgKind.SymBoolRef):
        return env[v]
    if k is ArgKind.TensorListArg:
        return [env[i] for i in v]
    if k is ArgKind.OptionalTensorListArg:
        return [None if i < 0 else env[i] for i in v]
    if k is ArgKind.SymIntListArg:
        vals, refs = v
        return [env[x] if r else x for x, r in zip(vals, refs)]
    if k is ArgKind.ScalarTypeArg:
        return dtypes.to_dtype(v)
    if k is ArgKind.LayoutArg:
        return dtypes.LAYOUT_OBJECTS[v]
    if k is ArgKind.MemoryFormatArg:
        return dtypes.MEMORY_FORMAT_OBJECTS[v]
    if k is ArgKind.DeviceArg:
        return torch.device(v.type) if v.index < 0 else torch.device(v.type, v.index)
    return v  # ints, floats, bools, strings, lists of those, Python scalars


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"{x.dtype}{list(x.shape)} on {x.device}"
    if isinstance(x, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in x):
        return "[" + ", ".join(_describe(e) for e in x) + "]"
    return repr(x)


class GraphRunner:
    """Runs one graph of a program. Ops are resolved once, at construction."""

    def __init__(self, program: Program, graph: Graph):
        self.graph = graph
        self.ops_ = [None if o.name == "prim::getitem" else resolve_op(o)
                     for o in program.operators]
        self.op_names_ = [o.qualified() for o in program.operators]

    def run(self, inputs: Mapping[InputDescriptor, torch.Tensor]
            ) -> Dict[OutputDescriptor, Optional[torch.Tensor]]:
        """Binds ``inputs`` by descriptor, executes every node, returns outputs by descriptor.

        Raises:
            KeyError: an input descriptor of the graph is missing from ``inputs`` (named).
            ExecutionError: a node failed.
        """
        env: List[Any] = [None] * len(self.graph.values)
        for gi in self.graph.inputs:
            if gi.descriptor not in inputs:
                raise KeyError(f"pt2rt: missing graph input {gi.descriptor} "
                               f"({self.graph.values[gi.value].name})")
            env[gi.value] = inputs[gi.descriptor]
        for node in self.graph.nodes:
            self._run_node(node, env)
        return {go.descriptor: (None if go.value < 0 else env[go.value])
                for go in self.graph.outputs}

    def _run_node(self, node: Node, env: List[Any]) -> None:
        fn = self.ops_[node.op]
        if fn is None:  # prim::getitem(TensorListRef list, int idx)
            env[node.outputs[0]] = env[node.args[0].value][node.args[1].value]
            return
        args = [_convert(a, env) for a in node.args if not a.kwarg_only]
        kwargs = {a.name: _convert(a, env) for a in node.args if a.kwarg_only}
        try:
            result = fn(*args, **kwargs)
        except Exception as e:
            desc = "; ".join(f"{a.name}={_describe(v)}" for a, v in
                             zip([a for a in node.args if not a.kwarg_only], args))
            desc += "".join(f"; {k}={_describe(v)}" for k, v in kwargs.items())
            raise ExecutionError(
                f"pt2rt: node {node.debug.fx_name} ({self.op_names_[node.op]}"
                f"{', module ' + node.debug.module_fqn if node.debug.module_fqn else ''}) "
                f"failed: {e}\n  arguments: {desc}\n  exported from:\n"
                f"{node.debug.stack_trace or '  (no stack trace)'}") from e
        if len(node.outputs) == 1:
            env[node.outputs[0]] = result
        elif node.outputs:  # ops returning nothing (aten::_assert_async.msg) have no outputs
            for vid, r in zip(node.outputs, result):
                env[vid] = r
