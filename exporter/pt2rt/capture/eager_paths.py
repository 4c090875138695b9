"""Modules whose eager forward chooses its computation from the values of its inputs, on a path
no tracer takes: where a capture's graph gives other values than eager PyTorch (caught by
``fidelity.check_output_values``) or a capture refuses a data-dependent read, the error names
these modules of the model and what the user can change.

* ``nn.TransformerEncoder`` with nested tensors enabled (``enable_nested_tensor=True``, the
  default; ``use_nested_tensor`` on torch >= 2.1): in eval mode, given a
  ``src_key_padding_mask`` that is left-aligned (checked on the mask's values,
  ``torch._nested_tensor_from_mask_left_aligned``) and when its layers qualify for the fast
  path, eager converts the padded batch to a nested tensor (``torch._nested_tensor_from_mask``)
  and back with ``to_padded_tensor(0.)``, so its outputs at padded positions are 0 instead of
  what the layers compute there. A trace takes the plain path (torch 1.13's ``make_fx`` sees a
  tensor with ``__torch_function__`` and skips the fast path; torch 2's fake tensors stop at
  the mask read). See https://pytorch.org/docs/stable/generated/torch.nn.TransformerEncoder.html.

And one library path (``library_checks``): ``torch.distributions`` validates its arguments'
values in Python (``validate_args``, on by default: ``Normal(loc, scale)`` checks
``scale > 0`` with ``bool(...)``), a data-dependent read no capture can keep; with
``validate_args=False`` the distribution computes the same values without the check. See
https://pytorch.org/docs/stable/distributions.html#torch.distributions.distribution.Distribution.
"""
from __future__ import annotations

import inspect
import os
import traceback as tb
from types import TracebackType
from typing import Iterable, List, Optional

import torch


def value_dependent_paths(model: torch.nn.Module,
                          traceback: Optional[TracebackType] = None) -> List[str]:
    """One sentence per module of ``model`` listed in the module docstring: where it is, what
    eager does, and how to export it. With ``traceback`` (of a capture's refusal), only the
    modules whose class's source file it passes through."""
    files = None if traceback is None else {f.filename for f in tb.extract_tb(traceback)}
    found = library_checks(files or ())
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.TransformerEncoder) and \
                getattr(m, "use_nested_tensor", getattr(m, "enable_nested_tensor", False)) and \
                (files is None or inspect.getsourcefile(type(m)) in files):
            where = repr(name) if name else "(the root)"
            found.append(
                f"nn.TransformerEncoder {where} runs on a nested tensor in eval mode when given "
                "a src_key_padding_mask (its outputs at padded positions are then 0, a path "
                "chosen from the mask's values); construct it with enable_nested_tensor=False, "
                "or set its attribute enable_nested_tensor (torch 1.13) / use_nested_tensor "
                "(torch >= 2.1) to False, to export it (eager then computes the padded "
                "positions too)")
    return found


def library_checks(filenames: Iterable[str]) -> List[str]:
    """The sentence for ``torch.distributions``' argument validation (module docstring) when
    one of ``filenames`` (the frames of a data-dependent read) is in that package; else []."""
    package = os.path.dirname(torch.distributions.__file__) + os.sep
    if not any(f.startswith(package) for f in filenames):
        return []
    return ["torch.distributions checks its arguments' values (validate_args, on by default): "
            "construct the distribution with validate_args=False, or call "
            "torch.distributions.Distribution.set_default_validate_args(False) before "
            "exporting; it then computes the same values without the check"]
