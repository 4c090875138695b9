"""Small FX graph rewrites shared by the capture backends (they keep what the graph computes).

``drop_unused_batch_norm_stats``: ``aten.native_batch_norm_backward`` with ``train=True`` reads
``save_mean`` / ``save_invstd`` and never ``running_mean`` / ``running_var`` (ATen's CPU and
CUDA kernels alike: ``batch_norm_backward_cpu_template`` uses the running stats only when
``train`` is false). After functionalization those arguments point at the *updated* running
stats, which a partitioner would then keep as saved activations for nothing: pass None.

``bernoulli_out_of_place``: torch 1.13's CPU dropout (``at::native::dropout``'s
``_dropout_impl``) draws its mask with ``at::empty_like(input).bernoulli_(1 - p)``, and torch
1.13's functionalization has no functional variant of ``bernoulli_.float``, so the in-place op
stays in the graph (the runtime's operator policy refuses ops writing to an argument). On a
tensor nothing else reads, ``bernoulli_.float(t, p)`` is ``bernoulli.p(t, p)``: the same
kernel on a new tensor, the same numbers from the same generator.

``upsample_backward_without_vec``: torch 1.13 differentiates ``F.interpolate``'s
``upsample_*.vec`` ops into ``upsample_*_backward.vec`` (output size or scale factors as
lists), overloads LibTorch 2.x no longer has: a 1.13 archive of any model that interpolates
(a segmentation head, a U-Net) loaded on LibTorch 2.x for inference only. Each such node
becomes the ``.default`` overload, which both versions have with one schema, with the
arguments the ``.vec`` kernel computes and passes to it (ATen's ``UpSample.h``:
``compute_output_size`` — the given sizes, else ``int64(input_size[d + 2] * scale[d])`` — and
``get_scale_value`` per spatial dim): the same kernel, the same numbers. Static sizes only; a
node with symbolic sizes keeps ``.vec``.

``symint_operands_as_tensors``: with a dynamic dim, ``x * x.shape[0]`` traces to
``aten.mul.Tensor(x, sym_size)``: a SymInt where the schema wants a Tensor, which ATen's Python
binding wraps as a 0-dim "wrapped number" tensor and an archive cannot express (the loader
refused such an archive: "argument 'other' refers to value 17 'sym_size' of kind SymInt,
expected Tensor"). It becomes ``aten.scalar_tensor(s, dtype=...)`` with the dtype that gives
the wrapped number's type promotion (``torch.result_type``): int64 beside a floating, complex
or bool tensor (a 0-dim integer tensor does not raise a floating one's dtype; it makes a bool
one int64), the other operand's own dtype beside an integer one (so 0-dim operands too keep
it).

``integral_sizes_without_floats``: with a dynamic spatial dim, ``F.interpolate(x,
scale_factor=2)``'s decomposition (torch >= 2) computes the output size as
``math.trunc(torch.sym_float(s) * 2.0)``, size arithmetic through a float that the archive's
SymInt ops (``sym::add`` ... ``sym::floordiv``) do not have. Where the float factor is a whole
number the result is ``s * 2`` exactly (for sizes below 2^53), which they do: each
``trunc`` / ``floor`` / ``ceil`` of ``sym_float(s) * c`` (or ``c * sym_float(s)``, or of
``sym_float(s)`` alone) with integral ``c`` becomes ``s * int(c)``. A factor that is a short
binary fraction (``scale_factor=1.5`` or ``0.5``: c = m / d exactly, m and d below 2^22,
``symbols.dyadic_ratio``) makes ``(s * m) // d`` (floor, trunc: sizes are not negative) or
``(s * m + d - 1) // d`` (ceil), equal to the float computation for sizes below 2^31. Other
factors (1/3 is not a binary fraction) are left, and refused by the lowering, naming the
node.

``slice_backward_sums_as_cat``: a sum of ``slice_backward``s tiling a dim is the ``cat`` of the
pieces (see its docstring).

``zero_tangents_of_parameter_mutations``: AOTAutograd (torch 2.x) gives a parameter mutated in
forward (``nn.Embedding(max_norm=...)``'s ``embedding_renorm_``) a tangent input in the
backward graph, added to the parameter's gradient. A parameter that requires grad can only be
updated in place under ``torch.no_grad()`` (eager refuses an in-place op on such a leaf
otherwise), so nothing differentiates through its new value and that tangent is always zero:
it becomes ``aten.zeros`` of the parameter's shape, and the archive's backward keeps taking
tangents of Plain outputs only (the runtime's calling convention).
"""
from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

from ..ir.descriptors import InputKind, OutputKind
from ..ir.symbols import dyadic_ratio, is_symint
from .export_policy import dtype_of

_BN_BACKWARD = torch.ops.aten.native_batch_norm_backward.default
_BERNOULLI_INPLACE = torch.ops.aten.bernoulli_.float


def drop_unused_batch_norm_stats(graph: fx.Graph) -> None:
    """Sets the running_mean / running_var arguments of training-mode
    ``native_batch_norm_backward`` nodes to None, in place."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target is _BN_BACKWARD:
            args = list(node.args)
            if len(args) > 7 and args[7] is True:
                args[3] = None
                args[4] = None
                node.args = tuple(args)


def bernoulli_out_of_place(graph: fx.Graph) -> None:
    """Rewrites ``bernoulli_.float(t, p)`` on a value only that node reads (not a graph input)
    to ``bernoulli.p(t, p)``, in place. Other uses are left (and refused downstream)."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target is _BERNOULLI_INPLACE \
                and isinstance(node.args[0], fx.Node) and node.args[0].op != "placeholder" \
                and len(node.args[0].users) == 1 and "generator" not in node.kwargs:
            p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
            node.target = torch.ops.aten.bernoulli.p  # its p has no default: written out
            node.args, node.kwargs = (node.args[0], p), {}


def _default_of_vec_backward(target):
    """The ``.default`` overload for an ``upsample_*_backward.vec`` op of this torch, else None."""
    packet = getattr(target, "overloadpacket", None)
    name = getattr(packet, "__name__", "")
    if getattr(target, "_overloadname", None) != "vec" or "upsample" not in name \
            or not name.endswith("_backward"):
        return None
    return getattr(packet, "default", None)


def upsample_backward_without_vec(graph: fx.Graph) -> int:
    """Rewrites each ``upsample_*_backward.vec`` node with static sizes to the ``.default``
    overload (see the module docstring), in place; returns how many."""
    done = 0
    for node in graph.nodes:
        default = _default_of_vec_backward(node.target) if node.op == "call_function" else None
        if default is None or node.kwargs:
            continue
        grad, output_size, input_size, *rest = node.args
        align = rest[:-1]  # (align_corners,) for the linear / cubic modes, () for nearest
        scales = rest[-1] if rest else None
        spatial = len(input_size) - 2
        if not all(type(v) is int for v in list(input_size) + list(output_size or [])) \
                or (output_size is None and (scales is None or len(scales) != spatial)):
            continue
        if output_size is None:
            output_size = [int(input_size[d + 2] * scales[d]) for d in range(spatial)]
        per_dim = [float(v) for v in scales] if scales is not None else [None] * spatial
        node.target = default
        node.args = (grad, list(output_size), list(input_size), *align, *per_dim)
        done += 1
    return done


_ROUNDINGS = {math.trunc, math.floor, math.ceil}


def _integral_product(node):
    """(s, m, d) when ``node`` is ``sym_float(s)``, ``sym_float(s) * c`` or ``c * sym_float(s)``
    with a float ``c`` = m / d exactly (``symbols.dyadic_ratio``; d = 1 for a whole number);
    else None."""
    sym_float = getattr(torch, "sym_float", None)
    if not isinstance(node, fx.Node) or node.op != "call_function" or sym_float is None:
        return None
    if node.target is sym_float:
        return node.args[0], 1, 1
    if node.target is operator.mul and len(node.args) == 2:
        for f, c in (node.args, node.args[::-1]):
            if isinstance(f, fx.Node) and f.op == "call_function" and f.target is sym_float:
                ratio = dyadic_ratio(c)
                if ratio is not None:
                    return (f.args[0], *ratio)
    return None


def integral_sizes_without_floats(graph: fx.Graph) -> int:
    """Rewrites rounded whole-number multiples of ``sym_float(s)`` to SymInt products (see the
    module docstring), in place; returns how many."""
    done = 0
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in _ROUNDINGS or len(node.args) != 1:
            continue
        found = _integral_product(node.args[0])
        if found is None or not _is_symint_node(found[0]):
            continue
        size, m, d = found
        val = size.meta["val"]
        with graph.inserting_before(node):
            product = graph.call_function(operator.mul, (size, m)) if m != 1 else size
            if product is not size:
                product.meta["val"] = val = val * m
            if d != 1:
                if node.target is math.ceil:
                    product = graph.call_function(operator.add, (product, d - 1))
                    product.meta["val"] = val = val + (d - 1)
                product = graph.call_function(operator.floordiv, (product, d))
                product.meta["val"] = val // d
        node.replace_all_uses_with(product)
        dead = [node]
        while dead:  # the rounding, then the float product and sym_float once unused
            n = dead.pop()
            inputs = [a for a in n.args if isinstance(a, fx.Node)]
            graph.erase_node(n)
            dead += [a for a in inputs if not a.users and a.op == "call_function"
                     and _integral_product(a) is not None]
        done += 1
    return done


def _is_symint_node(v) -> bool:
    return isinstance(v, fx.Node) and is_symint(v.meta.get("val"))


def symint_operands_as_tensors(graph: fx.Graph) -> int:
    """Rewrites each SymInt given for a ``Tensor`` argument to an ``aten.scalar_tensor`` node
    (see the module docstring), in place; returns how many."""
    done = 0
    for node in list(graph.nodes):
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        if schema is None:
            continue
        args = list(node.args)
        tensors = [a for a in args if dtype_of(a) is not None]
        for i, (sa, v) in enumerate(zip(schema.arguments, args)):
            if sa.type.kind() != "TensorType" or not _is_symint_node(v):
                continue
            other = dtype_of(tensors[0]) if tensors else None
            integral = other is not None and not other.is_floating_point and \
                not other.is_complex and other is not torch.bool
            dtype = other if integral else torch.int64
            with graph.inserting_before(node):
                t = graph.call_function(torch.ops.aten.scalar_tensor.default, (v,),
                                        {"dtype": dtype})
            t.meta["val"] = torch.empty((), dtype=dtype)
            args[i] = t
            done += 1
        node.args = tuple(args)
    return done


def zero_tangents_of_parameter_mutations(backward) -> None:
    """Replaces each ``Tangent(output=InputMutation(of=Param))`` input of ``backward`` (a
    ``graph_ir.DescribedGraph``) by zeros of its shape and dtype, in place (module docstring)."""
    graph = backward.module.graph
    placeholders = backward.placeholders()
    first_op = next(n for n in graph.nodes if n.op != "placeholder")
    keep = []
    for ph, desc in zip(placeholders, backward.inputs):
        out = desc.output
        if not (desc.kind is InputKind.Tangent and out is not None
                and out.kind is OutputKind.InputMutation and out.of is not None
                and out.of.kind is InputKind.Param):
            keep.append(desc)
            continue
        val = ph.meta["val"]
        with graph.inserting_before(first_op):
            zeros = graph.call_function(torch.ops.aten.zeros.default, ([int(s) for s in val.shape],),
                                        {"dtype": val.dtype, "device": val.device})
        zeros.meta = dict(ph.meta)
        ph.replace_all_uses_with(zeros)
        graph.erase_node(ph)
    backward.inputs[:] = keep
    backward.module.recompile()
    backward.check()


_ADD = torch.ops.aten.add.Tensor
_SLICE_BACKWARD = torch.ops.aten.slice_backward.default
_CAT = torch.ops.aten.cat.default


def slice_backward_sums_as_cat(graph: fx.Graph) -> int:
    """Replaces each sum (a tree of ``aten.add.Tensor``) of ``aten.slice_backward`` nodes that
    pad pieces of one size list along one dim, with static bounds tiling the dim, by
    ``aten.cat`` of the pieces in order; returns how many sums it replaced.

    Each slice_backward pads its piece with zeros to the full size, so the sum places every
    piece where ``cat`` does: the same values (up to the sign of a zero: ``-0.0 + 0.0`` is
    ``+0.0``), without T zero tensors of the full size for T pieces. Used on torch 1.13's
    dynamic joint graphs, where ``symbolic_autograd_torch1`` runs ``select`` / ``split`` /
    ``unbind`` as slices (eager's backward there is ``select_backward``, ``cat`` or ``stack``).
    """
    replaced, gone = 0, set()
    # the largest trees first (a sum's root comes after its inner adds); an inner add whose
    # tree has other operands too (a ViT's class-token cat plus the position embedding) is
    # tried on its own when its root fails
    for node in reversed(list(graph.nodes)):
        if node in gone or not _is_add(node):
            continue
        leaves = _add_leaves(node)
        tiling = _tiling(leaves) if leaves else None
        if tiling is None:
            continue
        dim, grads = tiling
        with graph.inserting_before(node):
            cat = graph.call_function(_CAT, (grads, dim))
        cat.meta = dict(node.meta)
        node.replace_all_uses_with(cat)
        _erase_tree(graph, node, gone)
        replaced += 1
    return replaced


def _is_add(node: fx.Node) -> bool:
    return node.op == "call_function" and node.target is _ADD and not node.kwargs \
        and len(node.args) == 2


def _add_leaves(node: fx.Node):
    """The non-add operands of the add tree rooted at ``node`` (inner adds have one user), or
    None if one is not a single-use slice_backward."""
    leaves = []
    for a in node.args:
        if not isinstance(a, fx.Node):
            return None
        if _is_add(a) and len(a.users) == 1:
            sub = _add_leaves(a)
            if sub is None:
                return None
            leaves.extend(sub)
        elif a.op == "call_function" and a.target is _SLICE_BACKWARD and len(a.users) == 1:
            leaves.append(a)
        else:
            return None
    return leaves


def _tiling(leaves):
    """``(dim, [piece, ...])`` ordered by start if the slice_backward ``leaves`` share sizes and
    dim, have step 1 and static bounds tiling ``[0, size)``; else None."""
    grad, sizes, dim, start, end, step = leaves[0].args
    if not isinstance(dim, int) or not -len(sizes) <= dim < len(sizes) or \
            not isinstance(sizes[dim], int):
        return None
    dim, size = dim % len(sizes), sizes[dim]
    spans = []
    for leaf in leaves:
        g, s, d, a, b, st = leaf.args
        if list(s) != list(sizes) or d % len(sizes) != dim or st != 1 or \
                not isinstance(a, int) or not isinstance(b, int):
            return None
        a = a + size if a < 0 else a
        b = b + size if b < 0 else min(b, size)
        spans.append((a, b, g))
    spans.sort(key=lambda t: t[0])
    at = 0
    for a, b, _ in spans:
        if a != at or b <= a:
            return None
        at = b
    return (dim, [g for _, _, g in spans]) if at == size else None


def _erase_tree(graph: fx.Graph, node: fx.Node, gone: set) -> None:
    args = [a for a in node.args if isinstance(a, fx.Node)]
    graph.erase_node(node)
    gone.add(node)
    for a in args:
        if a.users:
            continue
        if _is_add(a):
            _erase_tree(graph, a, gone)
        else:
            graph.erase_node(a)
            gone.add(a)
