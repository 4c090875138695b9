"""Symbolic-shape rules pt2rt adds to torch 1.13 for the duration of a dynamic-shape capture.

torch 1.13's ``FakeTensorMode`` runs an op on tensors with symbolic sizes only through a Python
meta function (``torch._meta_registrations.meta_table``), a Python decomposition
(``torch._decomp.decomposition_table``) or the op's CompositeImplicitAutograd decomposition
(torch/_subclasses/fake_tensor.py); C++ meta kernels would read concrete sizes and raise
("couldn't find symbolic meta function/decomposition", "Cannot call sizes() on tensor with
symbolic sizes"). ``symbolic_rules_torch1.symbolic_rules()`` adds the rules the common models
need (``meta_rules()``) to
``meta_table`` while a capture traces and removes them afterwards (the user's torch is left as
it was). Each rule computes only the output's metadata (shape, dtype) with symbolic-friendly
tensor factories; the graph keeps the original ATen op, so the runtime runs ATen's kernel.

Rules (the op -> its output shapes, as ATen's kernels compute them):

* ``aten.lerp.Scalar`` (BatchNorm running statistics, ``decompositions.py``): broadcast shape.
* ``aten.baddbmm`` (``nn.MultiheadAttention`` with a mask, ``nn.TransformerDecoder``):
  ``[b, n, p]`` for ``[b, n, m] @ [b, m, p]`` (Blas.cpp).
* ``aten.topk`` (mixture-of-experts routing): values and int64 indices with ``k`` at ``dim``
  (Sorting.cpp); ``aten.argmax`` / ``argmin``: int64, ``dim`` removed or kept;
  ``aten.cummax`` / ``cummin``: values and indices like ``self``;
  ``aten.logcumsumexp``, ``cumprod``: like ``self``.
* ``aten.pixel_shuffle`` / ``pixel_unshuffle`` (super-resolution heads): channels divided /
  multiplied by r², height and width multiplied / divided by r (PixelShuffle.cpp).
* ``aten.max.dim`` / ``min.dim``: values and int64 indices, ``dim`` removed or kept;
  ``aten.sort`` (``.default``, ``.stable``): values and int64 indices of ``self``'s shape
  (ReduceOps.cpp, Sorting.cpp); ``aten.glu``: ``dim`` halved, its backward like ``self``
  (Activation.cpp); ``aten.logical_and_`` (``clamp``'s backward): in place; ``aten.zero`` (functionalized
  ``zero_``): like ``self``;
  ``aten.reflection_pad{1,2,3}d`` / ``replication_pad{1,2,3}d``: as ``constant_pad_nd``, their
  backward like ``self`` (ReflectionPad.cpp, ReplicationPadding.cpp).
* ``aten.gather``: the index's shape; ``aten.scatter`` (``.src``, ``.value``), ``scatter_add``,
  ``scatter_reduce.two``, ``index_add``: like ``self`` (ScatterGatherChecks.h).
* ``aten.convolution_backward``: grad_input like input, grad_weight like weight, grad_bias
  ``[out_channels]`` (aten/src/ATen/native/Convolution.cpp).
* ``aten.max_pool2d_with_indices_backward``, ``aten.avg_pool2d_backward``,
  ``aten._adaptive_avg_pool2d_backward``: like the forward's input.
* ``aten.native_batch_norm_backward``: like input, weight, weight.
* ``aten.avg_pool3d``, ``aten.max_pool3d_with_indices`` (values and int64 indices),
  ``aten.adaptive_max_pool2d`` (the same) over static spatial dims (Pool.h's
  ``pooling_output_shape``), their backward like ``self``; ``aten.native_group_norm``: the
  output like input, mean and rstd ``[N, group]``, its backward like input, ``[C]``, ``[C]``;
  ``aten.grid_sampler_2d`` / ``_3d`` (``F.grid_sample``): ``[N, C, *out]`` of its grid
  ``[N, *out, 2 or 3]``, its backward like input and grid (GridSampler.cpp).
* ``aten.im2col`` / ``aten.col2im`` (``F.unfold`` / ``F.fold``, each the other's backward):
  ``[N, C kh kw, L]`` and ``[N, C, *output_size]`` (Im2Col.cpp, Col2Im.cpp).
* ``aten._weight_norm_interface`` (``torch.nn.utils.weight_norm``: wav2vec2's positional
  convolution, HiFi-GAN) and its backward: like ``v`` and ``g`` (WeightNorm.cpp) — as Meta
  kernels (``symbolic_dispatch_torch1``): their inputs are weights, never symbolic.
* ``aten._adaptive_avg_pool2d``: ``[*input.shape[:-2], *output_size]``.
* ``aten.roll`` (swin_t's shifted windows): a new tensor of the input's sizes;
  ``aten.slice_scatter``, ``aten.select_scatter`` (functionalization of a ``__setitem__``),
  ``aten.as_strided_scatter`` (of a write into an ``as_strided`` view): like ``self``; ``aten.constant_pad_nd`` (``F.pad``): the last ``len(pad) / 2`` dims grown by their pads
  (PadNd.cpp). Their torch 1.13 decompositions call ``narrow`` with SymInts, which 1.13's
  Python binding does not take.
* ``aten.bernoulli_.float``, ``aten.div_.Tensor``, ``aten.mul_.Tensor`` (dropout's mask):
  in place, ``self`` (an in-place op's result has its self's shape).
* ``aten.select.int``: ``self`` without ``dim``, a view (a negative index counts from the
  end; the graph keeps it as given and ATen's kernel wraps it at run time, so a dynamic dim is
  never fixed to its traced size) (aten/src/ATen/native/TensorShape.cpp).
* ``aten.split.Tensor``, ``aten.unsafe_split.Tensor``, ``aten.unbind.int`` over a static dim:
  the pieces as views (TensorShape.cpp); over a symbolic dim refused (the number of results
  would depend on the size: a dynamic LSTM sequence length stops at ``aten.unbind.int``).
* ``aten.slice_backward``, ``aten.select_backward``: a new tensor of the input's sizes.
* ``aten.upsample_bilinear2d.vec``, ``aten.upsample_bicubic2d.vec``, ``aten.upsample_nearest2d.vec`` (``F.interpolate``, the
  segmentation heads): ``[N, C, *output_size]`` (or the spatial sizes times the scale
  factors); their ``_backward.vec``: the input's sizes (UpSample.cpp).

Functions whose C++ implementation reads concrete sizes run, while a capture traces, as
equivalent Python (``symbolic_rules_torch1.SymbolicFunctions``, a ``TorchFunctionMode``, with
the functions below):

* ``F.dropout``: ATen's ``_dropout_impl`` (aten/src/ATen/native/Dropout.cpp) — the mask is
  ``empty_like(x).bernoulli_(1 - p)`` divided by ``1 - p`` and the result ``x * mask`` — the
  same values and RNG draws as the static capture; identity when not training or p == 0
  (``symbolic_dropout_torch1``, also the feature and alpha variants);
* ``x.mean()`` while autograd records: ``mean`` over every dim (``mean_all``);
* ``F.linear`` on inputs of >= 3 dims: ATen's ``linear`` / ``matmul`` fold (``aten_linear``);
* ``Tensor.__getitem__`` with basic indices (slices with int bounds, ``None``, ``...``, ints):
  ``aten.slice.Tensor`` / ``unsqueeze`` / ``select.int`` (ints, on static and dynamic dims,
  negative ones kept as given), as ``applySelect``/``applySlicing``
  (torch/csrc/autograd/python_variable_indexing.cpp) compute them; ``Tensor.__setitem__``
  with basic indices: that view, then ``copy_`` / ``fill_`` of the value;
* ``torch.einsum`` of a batched matrix product: one ``bmm`` (``einsum_as_bmm``);
* ``Tensor.narrow`` / ``torch.narrow`` over a static dim: ``slice`` (``narrow_as_slice``);
* ``Tensor.chunk`` / ``torch.chunk``: ATen's ``chunk`` = ``split(ceil(size / chunks), dim)``
  over a static dim (``chunk_as_split``); ``Tensor.unbind`` / ``torch.unbind`` over a static
  dim;
* ``torch.lstm`` (``nn.LSTM``): ``symbolic_rnn_torch1.lstm``, ATen's RNN.cpp CPU path.

When autograd records, ``select``, ``split``, ``unbind`` and ``cat`` of those go through
``symbolic_autograd_torch1`` (torch 1.13's autograd nodes for them read concrete sizes).
``symbolic_dispatch_torch1.dispatch_patches`` adds what acts below the function level (Meta
and CompositeImplicitAutograd Python kernels, e.g. ``chunk`` and ``dropout`` inside
``F.multi_head_attention_forward``; SymInt truthiness and ``float``).

Losses are in ``symbolic_losses_torch1``. An op still without a rule fails the export:
``no_symbolic_rule`` turns torch's error into an ``ExportError`` naming the op — or, when a
backward formula failed, the autograd node — and saying that static shapes still work, and,
for a training trace, that the inference graph alone (``train=False``) does.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import torch

from ...errors import ExportError
from ..eager_paths import value_dependent_paths
from . import symbolic_autograd_torch1 as autograd_ops

aten = torch.ops.aten


def _lerp_scalar(self, end, weight):
    shape = torch.broadcast_shapes(self.shape, end.shape)
    return self.new_empty(shape)


def _baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
    # nn.MultiheadAttention with an attn_mask, nn.TransformerDecoder (Blas.cpp): [b, n, p]
    return batch1.new_empty((batch1.shape[0], batch1.shape[1], batch2.shape[2]))


def _topk(self, k, dim=-1, largest=True, sorted=True):
    # MoE routing (Sorting.cpp): values and int64 indices, dim `dim` of size k
    shape = list(self.shape)
    if shape:
        shape[dim] = k
    return self.new_empty(shape), self.new_empty(shape, dtype=torch.long)


def _arg_reduce(self, dim=None, keepdim=False):
    # argmax / argmin (ReduceOps.cpp): int64, `dim` removed or kept as 1; all dims without it
    if dim is None:
        return self.new_empty((1,) * self.dim() if keepdim else (), dtype=torch.long)
    shape = list(self.shape)
    if keepdim:
        shape[dim] = 1
    else:
        del shape[dim]
    return self.new_empty(shape, dtype=torch.long)


def _reduce_with_indices(self, dim, keepdim=False):
    # max.dim / min.dim (ReduceOps.cpp): values and int64 indices, `dim` removed or kept as 1
    shape = list(self.shape)
    if shape:
        if keepdim:
            shape[dim] = 1
        else:
            del shape[dim]
    return self.new_empty(shape), self.new_empty(shape, dtype=torch.long)


def _sort(self, *args, **kwargs):
    # sort / sort.stable (Sorting.cpp): values and int64 indices of self's shape
    return self.new_empty(self.shape), self.new_empty(self.shape, dtype=torch.long)


def _glu(self, dim=-1):
    # Activation.cpp: `dim` halved
    shape = list(self.shape)
    shape[dim] = shape[dim] // 2
    return self.new_empty(shape)


def _values_and_indices(self, dim):
    # cummax / cummin (ReduceOps.cpp): self's shape, values and int64 indices
    return self.new_empty(self.shape), self.new_empty(self.shape, dtype=torch.long)


def _gather(self, dim, index, sparse_grad=False):
    # the index's shape (ScatterGatherChecks.h)
    return self.new_empty(index.shape)


def _pixel_shuffle(self, upscale_factor):
    # PixelShuffle.cpp: [..., C / r^2, H * r, W * r]
    r = upscale_factor
    *batch, c, h, w = self.shape
    return self.new_empty((*batch, c // (r * r), h * r, w * r))


def _pixel_unshuffle(self, downscale_factor):
    r = downscale_factor
    *batch, c, h, w = self.shape
    return self.new_empty((*batch, c * r * r, h // r, w // r))


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                          transposed, output_padding, groups, output_mask):
    grad_input = input.new_empty(input.shape) if output_mask[0] else None
    grad_weight = weight.new_empty(weight.shape) if output_mask[1] else None
    grad_bias = grad_output.new_empty((grad_output.shape[1],)) if output_mask[2] else None
    return grad_input, grad_weight, grad_bias


def _like_self(grad_output, self, *args, **kwargs):
    return self.new_empty(self.shape)


def _scatter_backward(grad_output, input_sizes, *args):
    # slice_backward / select_backward (torch's decompositions go through slice_scatter /
    # select_scatter, without symbolic meta): a new tensor of the input's sizes
    return grad_output.new_empty(input_sizes)


def _upsample_vec(input, output_size, *args):
    """``upsample_{nearest,bilinear}2d.vec(input, output_size, [align_corners,] scale_factors)``
    (UpSample.cpp ``compute_output_size``): [N, C, *output_size], or each spatial size times
    its scale factor, floored."""
    scales = args[-1]
    spatial = input.shape[2:]
    if output_size is not None:
        sizes = list(output_size)
    elif scales is not None:
        sizes = [int(s * f) if isinstance(s, int) else s * f for s, f in zip(spatial, scales)]
        if not all(isinstance(x, int) for x in sizes):
            return NotImplemented
    else:
        return NotImplemented
    return input.new_empty(list(input.shape[:2]) + sizes)


def _upsample_vec_backward(grad_output, output_size, input_size, *args):
    """``upsample_*2d_backward.vec``: a gradient of the input's sizes."""
    return grad_output.new_empty(list(input_size))


def _native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                                save_invstd, train, eps, output_mask):
    channels = input.shape[1]
    return (input.new_empty(input.shape) if output_mask[0] else None,
            input.new_empty((channels,)) if output_mask[1] else None,
            input.new_empty((channels,)) if output_mask[2] else None)


def _like_input(self, *args, **kwargs):
    return self.new_empty(self.shape)


def _constant_pad_nd(self, pad, value=0):
    sizes = list(self.shape)
    for i in range(len(pad) // 2):
        sizes[-1 - i] = sizes[-1 - i] + pad[2 * i] + pad[2 * i + 1]
    return self.new_empty(sizes)


def _pad_nd(self, padding):
    # reflection_pad{1,2,3}d / replication_pad{1,2,3}d (ReflectionPad.cpp, ReplicationPadding.cpp):
    # the last len(padding) / 2 dims grown by their pads, as constant_pad_nd
    return _constant_pad_nd(self, padding)


def _adaptive_avg_pool2d(self, output_size):
    return self.new_empty(list(self.shape[:-2]) + list(output_size))


def _n_tuple(value, n):
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    return value * n if len(value) == 1 else value


def _pooled(size, kernel, pad, stride, dilation, ceil_mode):
    """ATen's ``pooling_output_shape`` (Pool.h) of one static dim."""
    if not isinstance(size, int):
        raise RuntimeError("Cannot call sizes() on tensor with symbolic sizes/strides: pooling "
                           "over a symbolic spatial dim")
    out = (size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) \
        // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool3d_shape(self, kernel_size, stride, padding, dilation, ceil_mode):
    k = _n_tuple(kernel_size, 3)
    st = _n_tuple(stride, 3) if stride else k
    pad, dil = _n_tuple(padding, 3), _n_tuple(dilation, 3)
    return list(self.shape[:-3]) + [_pooled(self.shape[-3 + d], k[d], pad[d], st[d], dil[d],
                                            ceil_mode) for d in range(3)]


def _avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    return self.new_empty(_pool3d_shape(self, kernel_size, stride, padding, 1, ceil_mode))


def _max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1,
                             ceil_mode=False):
    shape = _pool3d_shape(self, kernel_size, stride, padding, dilation, ceil_mode)
    return self.new_empty(shape), self.new_empty(shape, dtype=torch.long)


def _adaptive_max_pool2d(self, output_size):
    shape = list(self.shape[:-2]) + _n_tuple(output_size, 2)
    return self.new_empty(shape), self.new_empty(shape, dtype=torch.long)


def _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    # GridSampler.cpp: [N, C, *out] for a grid [N, *out, 2 or 3]
    return input.new_empty([input.shape[0], input.shape[1]] + list(grid.shape[1:-1]))


def _grid_sampler_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                           align_corners, output_mask):
    return input.new_empty(input.shape), grid.new_empty(grid.shape)


def _native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    # group_norm.cpp: the output like input, mean and rstd [N, group]
    return input.new_empty(input.shape), input.new_empty((N, group)), \
        input.new_empty((N, group))


def _native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group,
                                output_mask):
    return input.new_empty(input.shape), input.new_empty((C,)), input.new_empty((C,))


def _im2col(self, kernel_size, dilation, padding, stride):
    # F.unfold (Im2Col.cpp): [N, C * kh * kw, L], L the product over the (static) spatial dims of
    # (size + 2 pad - dilation (k - 1) - 1) // stride + 1; a batched [C, H, W] input drops N
    blocks = 1
    for d in range(2):
        size = self.shape[-2 + d]
        blocks = blocks * ((size + 2 * padding[d] - dilation[d] * (kernel_size[d] - 1) - 1)
                           // stride[d] + 1)
    cols = self.shape[-3] * kernel_size[0] * kernel_size[1]
    return self.new_empty((self.shape[0], cols, blocks) if self.dim() == 4 else (cols, blocks))


def _col2im(self, output_size, kernel_size, dilation, padding, stride):
    # F.fold (Col2Im.cpp): [N, C, *output_size], C = the columns over kh * kw
    channels = self.shape[-2] // (kernel_size[0] * kernel_size[1])
    sizes = [channels, output_size[0], output_size[1]]
    return self.new_empty([self.shape[0]] + sizes if self.dim() == 3 else sizes)


def weight_norm_interface(v, g, dim=0):
    # torch.nn.utils.weight_norm (WeightNorm.cpp): w like v, the norms like g
    return v.new_empty(v.shape), g.new_empty(g.shape)


def weight_norm_interface_backward(grad_w, saved_v, saved_g, saved_norms, dim):
    return saved_v.new_empty(saved_v.shape), saved_g.new_empty(saved_g.shape)


def _in_place(self, *args, **kwargs):
    return self


def meta_select(self, dim, index):
    """``aten.select.int``: a view without ``dim`` (aten/src/ATen/native/TensorShape.cpp
    ``select``: a negative index counts from the end, wrapped by the kernel at run time, so the
    graph keeps the index as given)."""
    dim = dim % self.dim()
    size = self.shape[dim]
    if isinstance(size, int) and not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(self.shape)} at dimension {dim}")
    start = index + size if index < 0 else index
    sizes, strides = list(self.shape), list(self.stride())
    offset = self.storage_offset() + start * strides[dim]
    del sizes[dim], strides[dim]
    return self.as_strided(sizes, strides, offset)


def _static_size(self, dim, op):
    dim = dim % self.dim()
    size = self.shape[dim]
    if not isinstance(size, int):
        # the marker no_symbolic_rule recognises: the op is refused by name
        raise RuntimeError(f"Cannot call sizes() on tensor with symbolic sizes/strides: {op} "
                           f"over the symbolic dim {dim} (its number of results would depend "
                           "on the size)")
    return dim, size


def meta_unbind(self, dim=0):
    """``aten.unbind.int`` over a static dim: ``select(dim, i)`` for each i (TensorShape.cpp);
    refused over a symbolic dim."""
    dim, size = _static_size(self, dim, "unbind")
    return [meta_select(self, dim, i) for i in range(size)]


def meta_split(self, split_size, dim=0):
    """``aten.split.Tensor`` / ``unsafe_split.Tensor`` over a static dim: views of ``split_size``
    (the last one shorter) along ``dim`` (TensorShape.cpp ``split``); refused over a symbolic
    dim."""
    dim, size = _static_size(self, dim, "split")
    strides = list(self.stride())
    pieces = []
    for start in range(0, size, split_size):
        sizes = list(self.shape)
        sizes[dim] = min(split_size, size - start)
        pieces.append(self.as_strided(sizes, strides,
                                      self.storage_offset() + start * strides[dim]))
    return pieces


def meta_rules() -> Dict[Any, Callable]:
    return {
        aten.bernoulli_.float: _in_place,
        aten.div_.Tensor: _in_place,
        aten.mul_.Tensor: _in_place,
        aten.lerp.Scalar: _lerp_scalar,
        aten.baddbmm.default: _baddbmm,
        aten.topk.default: _topk,
        aten.argmax.default: _arg_reduce,
        aten.argmin.default: _arg_reduce,
        aten.cummax.default: _values_and_indices,
        aten.cummin.default: _values_and_indices,
        aten.max.dim: _reduce_with_indices,
        aten.min.dim: _reduce_with_indices,
        aten.sort.default: _sort,
        aten.sort.stable: _sort,
        aten.glu.default: _glu,
        aten.glu_backward.default: _like_self,
        aten.logical_and_.default: _in_place,
        aten.zero.default: _like_input,
        aten.logcumsumexp.default: _like_input,
        aten.cumprod.default: _like_input,
        aten.pixel_shuffle.default: _pixel_shuffle,
        aten.pixel_unshuffle.default: _pixel_unshuffle,
        aten.gather.default: _gather,
        aten.scatter.src: _like_input,
        aten.scatter.value: _like_input,
        aten.scatter_add.default: _like_input,
        aten.scatter_reduce.two: _like_input,
        aten.index_add.default: _like_input,
        aten.convolution_backward.default: _convolution_backward,
        aten.max_pool2d_with_indices_backward.default: _like_self,
        aten.avg_pool2d_backward.default: _like_self,
        aten._adaptive_avg_pool2d_backward.default: _like_self,
        aten._adaptive_avg_pool2d.default: _adaptive_avg_pool2d,
        aten.roll.default: _like_input,
        aten.slice_scatter.default: _like_input,
        aten.as_strided_scatter.default: _like_input,
        aten.select_scatter.default: _like_input,
        aten.constant_pad_nd.default: _constant_pad_nd,
        aten.reflection_pad1d.default: _pad_nd,
        aten.reflection_pad1d_backward.default: _like_self,
        aten.reflection_pad2d.default: _pad_nd,
        aten.reflection_pad2d_backward.default: _like_self,
        aten.reflection_pad3d.default: _pad_nd,
        aten.reflection_pad3d_backward.default: _like_self,
        aten.replication_pad1d.default: _pad_nd,
        aten.replication_pad1d_backward.default: _like_self,
        aten.replication_pad2d.default: _pad_nd,
        aten.replication_pad2d_backward.default: _like_self,
        aten.replication_pad3d.default: _pad_nd,
        aten.replication_pad3d_backward.default: _like_self,
        aten.native_batch_norm_backward.default: _native_batch_norm_backward,
        aten.im2col.default: _im2col,
        aten.avg_pool3d.default: _avg_pool3d,
        aten.avg_pool3d_backward.default: _like_self,
        aten.max_pool3d_with_indices.default: _max_pool3d_with_indices,
        aten.max_pool3d_with_indices_backward.default: _like_self,
        aten.adaptive_max_pool2d.default: _adaptive_max_pool2d,
        aten.adaptive_max_pool2d_backward.default: _like_self,
        aten.native_group_norm.default: _native_group_norm,
        aten.grid_sampler_2d.default: _grid_sampler,
        aten.grid_sampler_2d_backward.default: _grid_sampler_backward,
        aten.grid_sampler_3d.default: _grid_sampler,
        aten.grid_sampler_3d_backward.default: _grid_sampler_backward,
        aten.native_group_norm_backward.default: _native_group_norm_backward,
        aten.col2im.default: _col2im,
        aten.select.int: meta_select,
        aten.unsafe_split.Tensor: meta_split,
        aten.split.Tensor: meta_split,
        aten.unbind.int: meta_unbind,
        aten.slice_backward.default: _scatter_backward,
        aten.select_backward.default: _scatter_backward,
        aten.upsample_bilinear2d.vec: _upsample_vec,
        aten.upsample_nearest2d.vec: _upsample_vec,
        aten.upsample_bilinear2d_backward.vec: _upsample_vec_backward,
        aten.upsample_bicubic2d.vec: _upsample_vec,
        aten.upsample_bicubic2d_backward.vec: _upsample_vec_backward,
        aten.upsample_nearest2d_backward.vec: _upsample_vec_backward,
    }


INT64_MAX = 2 ** 63 - 1


def static_int(v: Any) -> Any:
    """A SymInt whose value is a constant (a static size that went through symbolic arithmetic,
    e.g. swin_t's window padding ``(w - W % w) % w``) as that int; anything else as it is."""
    if isinstance(v, torch.SymIntNode):
        py = v.get_pyobj()
        expr = py.shape_env.replace(py.expr)
        if getattr(expr, "is_Integer", False):
            return int(expr)
    return v


def basic_getitem(x: torch.Tensor, index: Any) -> Any:
    """``x[index]`` for basic indices, or NotImplemented (then torch's own runs)."""
    idx = index if isinstance(index, tuple) else (index,)
    # constant SymInts (sizes of static dims read after symbolic arithmetic: swin_t's
    # x[:, :H, :W, :]) as ints
    idx = tuple(slice(static_int(i.start), static_int(i.stop), static_int(i.step))
                if isinstance(i, slice) else static_int(i) for i in idx)

    def plain_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    for i in idx:
        if isinstance(i, slice):
            if not all(v is None or plain_int(v) for v in (i.start, i.stop, i.step)) \
                    or (i.step is not None and i.step <= 0):
                return NotImplemented
        elif not (i is None or i is Ellipsis or plain_int(i)):
            return NotImplemented
    if sum(1 for i in idx if i is Ellipsis) > 1:
        return NotImplemented
    used = sum(1 for i in idx if i is not None and i is not Ellipsis)
    if used > x.dim():
        return NotImplemented
    if Ellipsis in idx:
        k = idx.index(Ellipsis)
        idx = idx[:k] + (slice(None),) * (x.dim() - used) + idx[k + 1:]
    out, d = x, 0
    for i in idx:
        if i is None:
            out = out.unsqueeze(d)
            d += 1
        elif isinstance(i, slice):
            if i != slice(None):
                out = aten.slice.Tensor(out, d, i.start, INT64_MAX if i.stop is None else i.stop,
                                        1 if i.step is None else i.step)
            d += 1
        else:
            size = out.shape[d]
            if isinstance(size, int) and not -size <= i < size:
                return NotImplemented     # out of range: torch's own IndexError
            # applySelect: the index as given (negative too: aten::select wraps it at run
            # time, so a dynamic dim is not fixed to the traced size)
            out = autograd_ops.select(out, d, i)
    return out


def basic_setitem(x: torch.Tensor, index: Any, value: Any) -> Any:
    """``x[index] = value`` for basic indices and a number or tensor value, as
    ``THPVariable_setitem`` (python_variable_indexing.cpp) does it: the indexed view, then
    ``copy_`` of the value (a number: ``fill_``, the same elements); NotImplemented otherwise
    (then torch's own runs)."""
    if not isinstance(value, (bool, int, float, torch.Tensor)):
        return NotImplemented
    view = basic_getitem(x, index)
    if view is NotImplemented:
        return NotImplemented
    if isinstance(value, torch.Tensor):
        view.copy_(value)
    else:
        view.fill_(value)
    return None


def unbind_function(x: torch.Tensor, dim: int = 0) -> Any:
    """``unbind`` over a static dim (``symbolic_autograd_torch1.unbind``); NotImplemented over a
    symbolic one (torch's own fails the export naming ``aten.unbind.int``)."""
    if not isinstance(x.shape[dim], int):
        return NotImplemented
    return tuple(autograd_ops.unbind(x, dim))


def mean_all(x: torch.Tensor, *, dtype: Any = None) -> Any:
    """``x.mean()`` while autograd records on symbolic sizes: ``mean`` over every dim
    (ATen's ``mean(self, dtype)`` is ``mean(self, {}, false, dtype)``, ReduceOps.cpp: the same
    values), whose autograd node takes symbolic sizes where 1.13's ``MeanBackward0`` saves
    concrete ones; NotImplemented otherwise."""
    if not autograd_ops.records(x):
        return NotImplemented
    return torch.mean(x, dim=list(range(x.dim())), dtype=dtype)


def chunk_as_split(x: torch.Tensor, chunks: int, dim: int = 0) -> Any:
    """ATen's ``chunk`` (aten/src/ATen/native/TensorShape.cpp): ``split(ceil(size / chunks),
    dim)`` on a static dim; NotImplemented on a symbolic one (its number of pieces would depend
    on the size: torch's own fails the export naming ``chunk``)."""
    size = x.shape[dim]
    if not isinstance(size, int) or size == 0 or chunks <= 0:
        return NotImplemented
    return tuple(autograd_ops.split(x, (size + chunks - 1) // chunks, dim))


def narrow_as_slice(x: torch.Tensor, dim: int, start: Any, length: Any) -> Any:
    """``x.narrow(dim, start, length)`` over a static dim, as ATen's ``narrow``
    (TensorShape.cpp): ``slice(dim, start, start + length)`` after wrapping a negative ``start``
    by the size and checking ``0 <= start <= start + length <= size`` (its C++ reads
    ``sizes()``); NotImplemented over a symbolic dim (``slice`` clamps where ``narrow`` raises
    at run time) or with a tensor ``start``."""
    dim = dim % max(x.dim(), 1)
    size = x.shape[dim] if x.dim() else None
    if not isinstance(size, int) or not isinstance(start, int) or not isinstance(length, int):
        return NotImplemented
    if start < 0:
        start += size
    if not 0 <= start <= start + length <= size:
        return NotImplemented   # torch's own raises its error
    return aten.slice.Tensor(x, dim, start, start + length, 1)


def einsum_as_bmm(equation: Any, *operands: Any) -> Any:
    """``torch.einsum`` of a batched matrix product — two operands sharing their leading batch
    letters, one contracted letter, each operand's other letter kept, in either order (MaxViT's
    attention: ``"BGHID,BGHJD->BGHIJ"``, ``"BGHIJ,BGHJD->BGHID"``) — as ATen's ``einsum``
    computes it (Linear.cpp ``sumproduct_pair``: the batch dims folded, one ``bmm``); any other
    equation NotImplemented (torch's own fails the export naming ``einsum``)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str) or len(operands) != 2 or "." in equation:
        return NotImplemented
    try:
        lhs, out = equation.replace(" ", "").split("->")
        a, b = lhs.split(",")
    except ValueError:
        return NotImplemented
    x, y = operands
    if len(a) != x.dim() or len(b) != y.dim() or len(set(a + b)) != len(a + b) - len(set(a) & set(b)):
        return NotImplemented
    n = len(out) - 2
    batch = out[:n]
    if n < 0 or a[:n] != batch or b[:n] != batch or len(a) != n + 2 or len(b) != n + 2:
        return NotImplemented
    (k,) = set(a[n:]) & set(b[n:]) or (None,)
    i, j = out[n:]
    if k is None or set(a[n:]) != {i, k} or set(b[n:]) != {k, j}:
        return NotImplemented
    x = x if a[n:] == i + k else x.transpose(-1, -2)
    y = y if b[n:] == k + j else y.transpose(-1, -2)
    folded = 1
    for s in x.shape[:n]:
        folded = folded * s
    r = torch.bmm(x.reshape(folded, x.shape[-2], x.shape[-1]),
                  y.reshape(folded, y.shape[-2], y.shape[-1]))
    return r.view(list(x.shape[:n]) + [r.shape[1], r.shape[2]])


def aten_linear(input, weight, bias=None):
    """ATen's ``linear`` (aten/src/ATen/native/Linear.cpp) for inputs of >= 3 dims: contiguous
    3-D with bias -> ``addmm`` on the [s0 * s1, s2] view; otherwise ``matmul``'s fold
    (``reshape(prod(leading sizes), in).mm(weight.t())``, ``_unsafe_view`` back) then
    ``+ bias``."""
    if input.dim() == 3 and bias is not None and input.is_contiguous():
        s0, s1, s2 = input.shape
        out = torch.addmm(bias, input.view(s0 * s1, s2), weight.t())
        return out.view(s0, s1, out.shape[1])
    lead = list(input.shape[:-1])
    folded = 1
    for s in lead:   # matmul folds with the product of the sizes, not -1
        folded = folded * s
    out = input.reshape(folded, input.shape[-1]).mm(weight.t())
    out = aten._unsafe_view.default(out, lead + [weight.shape[0]])
    return out if bias is None else out + bias


def _failing_op(e: BaseException) -> Optional[str]:
    """The ATen op being dispatched when ``e`` was raised (innermost frame with an OpOverload
    ``func``), else the torch function being called (innermost ``__torch_function__``'s
    ``func``, e.g. ``Tensor.__getitem__``), if any."""
    tb, op, fn = e.__traceback__, None, None
    while tb is not None:
        func = tb.tb_frame.f_locals.get("func")
        if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            op = str(func)
        elif tb.tb_frame.f_code.co_name == "__torch_function__" and callable(func):
            name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
            fn = name.replace("_TensorBase.", "Tensor.").replace("_VariableFunctionsClass.",
                                                                 "torch.")
        tb = tb.tb_next
    return op or fn


_MARKERS = ("couldn't find symbolic meta function", "on tensor with symbolic sizes",
            "Cannot call sizes()", "Cannot call strides()", "Cannot call numel()",
            "Trying to extract a concrete int out of a symbolic int", "SymIntNode",
            "could not find kernel", "Unable to cast Python instance to C++ type",
            # a depthwise convolution's backward over a symbolic height or width (mobilenet
            # v3's): 1.13 picks no backend for it and falls through to the overrideable stub
            "convolution_backward_overrideable",
            # a SymInt list where a binding wants ints (F.affine_grid's size on a dynamic dim)
            "must be tuple of ints")


def no_symbolic_rule(e: BaseException, model: torch.nn.Module, what: str,
                     backward: Optional[Tuple[str, str]] = None) -> None:
    """Raises an ExportError naming the op if ``e`` is torch's "no symbolic rule" error of a
    symbolic trace; returns otherwise. ``backward``: (op, autograd node) whose backward formula
    was running when ``e`` was raised (the joint trace's ``torch.autograd.grad``). A failure in
    a training trace (``what`` not "inference") comes from torch 1.13's autograd, whose nodes
    save and read concrete sizes; the inference graph alone (``train=False``) records none."""
    text = str(e)
    if not any(m in text for m in _MARKERS):
        return
    if backward is not None:
        name = f"the backward of {backward[0]} (autograd node {backward[1]})"
    else:
        name = _failing_op(e) or "an operator"
    hints = [] if what.startswith("inference") else [
        "torch 1.13's autograd records it with concrete sizes: train=False exports the "
        "inference graph alone with these dynamic shapes (torch 2.x captures both)"]
    hints += value_dependent_paths(model, e.__traceback__)
    raise ExportError(f"pt2rt.export: dynamic_shapes: {name} has no symbolic-shape rule on "
                      f"torch {torch.__version__} (tracing {type(model).__name__}, {what}: "
                      f"{text.splitlines()[0] if text else type(e).__name__}); the model can "
                      f"still be exported with static shapes (dynamic_shapes=None)"
                      f"{''.join(f'; {h}' for h in hints)}") from e
