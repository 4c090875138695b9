"""The C++ runtime's load-time refusals, applied at export: an op the runtime would refuse is a
``CaptureError`` naming the op, the graph, the node and the user's line, with the runtime's
own words — never an archive that fails to load.

What is mirrored (``schema/README.md`` "Operator policy"):

* the operator policy (``runtime/plan/op_policy.cpp``, ``classify_schema``), for ATen operators
  (other namespaces — custom operators — may be allowed at load with ``--allow-op`` /
  ``LoadOptions::allow_operators``, so they are not refused here, except operators that only
  exist in Python, below): the deny list; a non-optional argument the op writes (``mutates``);
  no return value (``no-return``, except the size checks and ``_assert_async``, which the
  runtime runs itself); the ``dynamic_output_shape`` tag (``masked_select``, ``nonzero``,
  ``unique*``, ``repeat_interleave.Tensor``, ``linalg_lstsq``, ...; ``aten::index`` only with a
  boolean mask); return and argument types an archive cannot carry; ``str`` arguments that
  are not mode selectors;
* the per-node write check (``runtime/model/meta_check.cpp``, ``check_node_writes``): an optional
  argument the op writes must be None, and a batch norm's ``running_mean`` / ``running_var``
  may only be given in eval mode (LibTorch 1.13's batch norms overwrite them in training mode
  without saying so): e.g. ``F.batch_norm(x, mean, var, training=True)`` where the statistics
  are not the module's buffers;
* results that are not strided, dense tensors (``runtime/core/result_check.cpp``): ops that make
  sparse, MKL-DNN or nested tensors (``to_sparse``, ``to_mkldnn``, ...);
* operators torch implements in Python only (``torch.library.custom_op``, e.g. torch 2.x's
  ``torch_nn::_linear_cross_entropy_batch_chunked``): no LibTorch process has them.

``check_graphs`` is called by ``capture.py`` on every captured graph (next to
``portability.check_portable``) and by the captures on the joint graph before it is
partitioned. ``outside_aten`` lists the custom operators (``torchvision::roi_align``, ...) an
archive would need the loading process to register and allow; ``capture.py`` warns about them.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Optional, Sequence

import torch

from ..errors import CaptureError

# runtime/plan/op_policy.cpp kDenied (every overload), with the runtime's reasons.
DENIED = {
    "aten::from_file": "maps or reads a file named by the archive",
    "aten::_copy_from": "writes into its argument 'dst' although its schema does not say so",
    "aten::_copy_from_and_resize":
        "writes into and resizes its argument 'dst' although its schema does not say so",
    "aten::_index_put_impl": "takes an 'unsafe' flag that skips index checks",
    "aten::_sparse_coo_tensor_unsafe": "builds a sparse tensor without checking its indices",
    "aten::_sparse_compressed_tensor_unsafe":
        "builds a sparse tensor without checking its indices",
    "aten::_sparse_csr_tensor_unsafe": "builds a sparse tensor without checking its indices",
    "aten::_sparse_csc_tensor_unsafe": "builds a sparse tensor without checking its indices",
    "aten::_sparse_bsr_tensor_unsafe": "builds a sparse tensor without checking its indices",
    "aten::_sparse_bsc_tensor_unsafe": "builds a sparse tensor without checking its indices",
    "aten::_unsafe_index": "indexes without bounds checks",
    "aten::_unsafe_masked_index": "indexes without bounds checks",
    "aten::_unsafe_index_put": "indexes without bounds checks",
    "aten::_unsafe_masked_index_put_accumulate": "indexes without bounds checks",
    "aten::_nested_view_from_buffer": "views a buffer at offsets it does not check",
    "aten::_nested_view_from_buffer_copy": "views a buffer at offsets it does not check",
    "aten::_nested_view_from_jagged": "views a buffer at offsets it does not check",
    "aten::_nested_view_from_jagged_copy": "views a buffer at offsets it does not check",
}

# Ops returning nothing that the runtime runs: torch.export's size checks (op_policy.cpp
# kChecks) and _assert_async (native_ops.h: a host-side check).
CHECKS = {"aten::_assert_scalar", "aten::_assert_tensor_metadata", "aten::sym_constrain_range",
          "aten::sym_constrain_range_for_size", "aten::_assert_async"}

# op_policy.cpp kModeSelectors: the str arguments that select a kernel mode.
MODE_SELECTORS = {"assert_msg", "UPLO", "approximate", "compute_mode", "driver", "equation",
                  "indexing", "interpolation", "mode", "norm", "ord", "p", "pad_mode",
                  "padding", "reduce", "rounding_mode", "side", "uplo"}

# Ops whose output sizes depend on data, for a torch without op tags (torch 1.13 has them;
# kept as the fallback the tag replaces).
DYNAMIC_OUTPUT_SHAPE = {
    "aten::masked_select", "aten::nonzero", "aten::nonzero_static", "aten::argwhere",
    "aten::unique", "aten::_unique", "aten::_unique2", "aten::unique_dim",
    "aten::unique_consecutive", "aten::unique_dim_consecutive", "aten::bincount",
    "aten::linalg_lstsq", "aten::_ctc_loss", "aten::_ctc_loss_backward", "aten::histc",
}
_DYNAMIC_OVERLOADS = {("aten::repeat_interleave", "Tensor"),
                      ("aten::repeat_interleave", "self_Tensor")}

_DYNAMIC_REASON = ("its output sizes depend on tensor data (tag dynamic_output_shape), which a "
                   "program cannot declare and pt2rt cannot bound at load")

# Results that are not strided, dense tensors (result_check.cpp refuses them at load).
_NON_STRIDED = re.compile(r"^aten::_?(to_sparse|sparse_coo_tensor|sparse_compressed_tensor|"
                          r"sparse_csr_tensor|sparse_csc_tensor|sparse_bsr_tensor|"
                          r"sparse_bsc_tensor|sparse_mask|to_mkldnn|nested_tensor|"
                          r"nested_from_padded|to_sparse_csr|to_sparse_csc|to_sparse_bsr|"
                          r"to_sparse_bsc)")


def _has_dynamic_shape(op: Any) -> bool:
    tag = getattr(getattr(torch, "Tag", None), "dynamic_output_shape", None)
    tags = getattr(op, "tags", None)
    if tags is None:
        tags = getattr(op, "_tags", None)
    schema = op._schema
    if tag is not None and tags is not None:
        return tag in tags
    return schema.name in DYNAMIC_OUTPUT_SHAPE or \
        (schema.name, schema.overload_name) in _DYNAMIC_OVERLOADS


def _kind(t: Any) -> str:
    """A JIT type's kind: "Tensor", "int", "SymInt", "float", "bool", "Scalar", "str",
    "Device", "Generator", "List", "Optional", ... (ScalarType, Layout and MemoryFormat arguments
    read as "int" in Python)."""
    if isinstance(t, torch._C.TensorType):
        return "Tensor"
    if isinstance(t, torch._C.OptionalType):
        return "Optional"
    if isinstance(t, torch._C.ListType):
        return "List"
    return str(t)


def _unwrap_optional(t: Any):
    if isinstance(t, torch._C.OptionalType):
        return t.getElementType(), True
    return t, False


_NUMBERS = {"int", "SymInt", "float", "SymFloat", "bool", "SymBool", "Scalar", "number"}
_SCALAR_ARGS = _NUMBERS | {"ScalarType", "Layout", "MemoryFormat", "Device", "str"}


def _list_element_ok(elem: Any) -> bool:
    e, optional = _unwrap_optional(elem)
    if _kind(e) == "Tensor":
        return True
    return not optional and _kind(e) in {"int", "SymInt", "float", "bool"}


def _carriable(t: Any) -> bool:
    """op_policy.cpp carriable_argument."""
    inner, optional = _unwrap_optional(t)
    kind = _kind(inner)
    if kind == "Tensor" or kind in _SCALAR_ARGS:
        return True
    if kind == "List":
        return _list_element_ok(inner.getElementType())
    if kind == "Generator":
        return optional  # left None: the default generator, as in eager
    return False


def _describable(t: Any) -> bool:
    """op_policy.cpp describable_return."""
    inner, optional = _unwrap_optional(t)
    kind = _kind(inner)
    if kind == "Tensor":
        return True
    if optional:
        return False
    if kind in _NUMBERS:
        return True
    if kind == "List":
        e, opt = _unwrap_optional(inner.getElementType())
        return _kind(e) == "Tensor" or (not opt and _kind(e) in ("int", "SymInt"))
    return False


def schema_refusal(op: Any) -> Optional[str]:
    """Why the runtime's operator policy refuses the ATen op ``op`` (an OpOverload), in its own
    words; None when it allows it."""
    schema = op._schema
    name = schema.name
    if name in DENIED:
        return DENIED[name]
    if name.startswith("aten::_test_"):
        return "is one of ATen's test operators (aten::_test_*)"
    for a in schema.arguments:
        info = a.alias_info
        if info is not None and info.is_write and not isinstance(a.type, torch._C.OptionalType):
            return (f"writes to its argument '{a.name}' (in-place and out= ops are not part of "
                    "the format: a graph's mutations are InputMutation outputs)")
    if not schema.returns and name not in CHECKS:
        return "returns nothing, so it can act only through side effects"
    if name != "aten::index" and _has_dynamic_shape(op):
        return _DYNAMIC_REASON
    for r in schema.returns:
        if not _describable(r.type):
            return (f"returns a {r.type}, which is not a graph value (tensor, list or number)")
    for a in schema.arguments:
        if not _carriable(a.type):
            return f"takes argument '{a.name}' of type {a.type}, which an archive cannot carry"
        inner, _ = _unwrap_optional(a.type)
        if _kind(inner) == "str" and a.name not in MODE_SELECTORS:
            return (f"takes str argument '{a.name}', which is not one of ATen's mode selectors "
                    "(file names, paths and free text are not allowed)")
    return None


def _node_value(node: Any) -> Any:
    for key in ("val", "tensor_meta"):
        v = node.meta.get(key) if hasattr(node, "meta") else None
        if v is not None:
            return v
    return None


def dtype_of(arg: Any) -> Optional[torch.dtype]:
    """The dtype an FX node's recorded value has (``meta['val']``, else ``tensor_meta``);
    None for a non-node or a node that is not a tensor."""
    v = _node_value(arg) if isinstance(arg, torch.fx.Node) else None
    return getattr(v, "dtype", None)


def _bound_arguments(node: Any, schema: Any) -> Sequence[Any]:
    """(schema argument, value) pairs of a call node (positional, then keyword)."""
    out = []
    for i, a in enumerate(schema.arguments):
        if i < len(node.args):
            out.append((a, node.args[i]))
        elif a.name in node.kwargs:
            out.append((a, node.kwargs[a.name]))
        else:
            out.append((a, a.default_value if a.has_default_value() else None))
    return out


def node_refusal(node: Any) -> Optional[str]:
    """Why the runtime refuses this call node at load for its arguments (meta_check.cpp's
    per-node checks) or its results; None when it does not."""
    op = node.target
    schema = op._schema
    name = schema.name
    if _NON_STRIDED.search(name):
        return ("makes a tensor that is not strided and dense (sparse, MKL-DNN or nested); "
                "only strided, dense tensors are supported")
    if name == "aten::_local_scalar_dense":
        # torch >= 2 with dynamic shapes traces .item() to an unbacked symbol instead of
        # raising; the runtime cannot compute what depends on it (its meta check fails).
        return ("reads a traced tensor's value as a Python number (item(), bool()/`if tensor`, "
                "int(), float(), tolist()), a data-dependent value a program cannot declare; "
                "keep the computation in tensors (e.g. x / x.abs().max() instead of "
                "x / x.abs().max().item())")
    bound = _bound_arguments(node, schema)
    if name == "aten::index":
        for a, v in bound:
            for e in (v if isinstance(v, (list, tuple)) else ()):
                if dtype_of(e) in (torch.bool, torch.uint8):
                    return "indexes with a boolean mask, whose result size depends on tensor data"
    training = None  # `training` (native_batch_norm) or `train` (its backward)
    for a, v in bound:
        if a.name in ("training", "train") and isinstance(v, bool):
            training = v
    for a, v in bound:
        writes = a.alias_info is not None and a.alias_info.is_write
        stat = a.name in ("running_mean", "running_var")
        if not (writes or stat) or not isinstance(v, torch.fx.Node):
            continue
        if stat and training is False:
            continue
        return (f"gets '{a.name}'" + (" in training mode" if stat else "")
                + ", which the kernel overwrites"
                + ("" if writes else " although its schema does not say so")
                + " (a graph's mutations must be InputMutation outputs)")
    return None


def python_only(op: Any) -> bool:
    """Whether ``op`` is an operator torch defines in Python (``torch.library.custom_op``),
    which no LibTorch process (the C++ runtime) has."""
    try:
        from torch._library.custom_ops import OPDEFS
    except ImportError:
        return False
    return op._schema.name in OPDEFS


def _hint(name: str, why: str) -> str:
    if "running_" in why:
        return ("; running statistics that are not the module's buffers are overwritten by a "
                "training-mode batch/instance norm: make them buffers of the module "
                "(nn.BatchNorm*d / nn.InstanceNorm*d(track_running_stats=True)), or pass None "
                "in training mode")
    if "dynamic_output_shape" in why or "boolean mask" in why:
        return dynamic_shape_hint(name)
    return ""


def dynamic_shape_hint(name: str) -> str:
    """What a user can do about op ``name`` (``aten::_ctc_loss``, ``aten::masked_select``, ...)
    whose output sizes depend on data: ``; ...`` to append to the refusal."""
    if "ctc_loss" in name:
        return ("; ATen's _ctc_loss sizes its log_alpha by max(target_lengths): call "
                "F.ctc_loss or nn.CTCLoss, which pt2rt captures as pt2rt::ctc_loss, instead of "
                "the ATen op")
    return ("; compute a fixed-size result instead (e.g. torch.where(mask, x, 0) for "
            "x[mask] / masked_select)")


def _where(node: Any) -> str:
    trace = node.meta.get("stack_trace") or ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    return f"; at:\n{trace.rstrip()}" if lines else ""


def outside_aten(graphs: Iterable[Any]) -> Sequence[str]:
    """The operators of ``graphs`` outside ATen and pt2rt's own (``ns::name.overload``,
    sorted): the runtime resolves them only in a process that registers them (torchvision's C++
    library for ``torchvision::``) and refuses them unless the load allows them
    (``LoadOptions::allow_operators``, ``export-cli --allow-op``)."""
    names = set()
    for g in graphs:
        for node in g.module.graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            schema = node.target._schema
            if schema.name.split("::")[0] not in ("aten", "pt2rt"):
                names.add(schema.name + (f".{schema.overload_name}"
                                         if schema.overload_name else ""))
    return sorted(names)


def check_graphs(graphs: Iterable[Any]) -> None:
    """Refuses graphs (``graph_ir.DescribedGraph``) holding a node the runtime refuses at load
    (module docstring).

    Raises:
        CaptureError: naming the op, the graph, the node, the rule's reason and the user's
            line when provenance has one.
    """
    for g in graphs:
        for node in g.module.graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            op = node.target
            schema = op._schema
            label = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
            if schema.name.startswith("aten::"):
                why = schema_refusal(op) or node_refusal(node)
                tail = ("; the C++ runtime would refuse the archive at load (schema/README.md "
                        "\"Operator policy\")")
            elif python_only(op):
                why = ("an operator torch implements in Python (torch.library.custom_op), "
                       "which the C++ runtime (LibTorch) does not have")
                tail = ""
            else:
                continue
            if why is None:
                continue
            raise CaptureError(f"pt2rt.export: the {g.role.name} graph calls {label} (node "
                               f"{node.name}): {why}{_hint(label, why)}{tail}{_where(node)}")
