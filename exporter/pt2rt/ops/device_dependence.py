"""Which ATen ops depend on the device they run on (both used at export; pure functions of the
op and its arguments, no torch state).

* ``device_dependent_results(target, args, kwargs)``: the results whose *shape* legitimately
  differs by device — eval-mode BatchNorm's ``save_mean``/``save_invstd`` (``[0]`` on the CPU,
  ``[C]`` on CUDA and meta; pytorch#85960 / #100985, ``native_batch_norm_helper`` in
  ``torch/_decomp/decompositions.py``) and ``_embedding_bag``'s ``offset2bag`` and
  ``max_indices``. The lowering (``passes/lower.py``) marks them ``Value.device_dependent_shape``
  (schema 1.5) and the C++ runtime checks them by dtype and a size bound.
* ``device_specific(op_name)``: whether an op belongs to a kernel family of one device or library
  (``*_for_cpu``, cuDNN, MIOpen, oneDNN, MPS, flash / efficient / cuDNN attention, NNPACK,
  XNNPACK, fused CUDA-only cells), which ``capture/portability.py`` and the export policy refuse.
"""
from __future__ import annotations

import re
from typing import Any, Dict, FrozenSet, Sequence


# ---------------------------------------------------------------------------
# Results whose shape depends on the device


def _arg(node_args: Sequence[Any], kwargs: Dict[str, Any], index: int, name: str,
         default: Any) -> Any:
    if len(node_args) > index:
        return node_args[index]
    return kwargs.get(name, default)


_EVAL_STATS = frozenset({1, 2})
_EMBEDDING_BAG_AUX = frozenset({1, 3})


def device_dependent_results(target: Any, args: Sequence[Any],
                             kwargs: Dict[str, Any]) -> FrozenSet[int]:
    """Indices of ``target``'s results whose shape differs between devices for these
    arguments (module docstring); empty for every other op."""
    name = getattr(getattr(target, "_schema", None), "name", "")
    if name == "aten::native_batch_norm":
        return _EVAL_STATS if _arg(args, kwargs, 5, "training", True) is False else frozenset()
    if name == "aten::_native_batch_norm_legit_no_training":
        return _EVAL_STATS
    if name in ("aten::_embedding_bag", "aten::_embedding_bag_forward_only"):
        return _EMBEDDING_BAG_AUX
    return frozenset()


# ---------------------------------------------------------------------------
# Kernel families of one device

# Kernel families that exist for one device only (or one library), by op name.
_DEVICE_SPECIFIC = re.compile(
    r"(_for_cpu|cudnn|miopen|mkldnn|^aten::_?mps|_mps_|_flash_attention|_efficient_attention|"
    r"_cudnn_attention|nnpack|xnnpack|_thnn_fused_|_fused_dropout|_conv_depthwise2d|"
    r"conv_depthwise3d|fbgemm)")


def device_specific(op_name: str) -> bool:
    """Whether ``op_name`` ("aten::<name>") belongs to a device-specific kernel family."""
    return bool(_DEVICE_SPECIFIC.search(op_name))
