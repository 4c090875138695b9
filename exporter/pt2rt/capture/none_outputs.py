"""``None`` among forward()'s outputs: allowed, as torch.export allows it.

A model may return ``None`` where it has no value to give — an optional output it does not
compute (``return logits, None``; Hugging Face models' ``past_key_values`` with
``use_cache=False``; a loss only computed when labels are passed). torch.export keeps such a
leaf in ``ExportedProgram``'s ``out_spec`` and its graph returns ``None`` there. pt2rt's outputs
are tensors (the runtime's outputs, the C++ API's ``std::vector<at::Tensor>``,
``export-cli run``'s output file), so during an export (``none_outputs_dropped``) a forward
hook on the root module replaces every ``None`` leaf of its return value by an empty tuple, a
``torch.utils._pytree`` node without leaves: the captured graphs and the eager references have
no output there, and the other outputs keep their pytree paths as names (``[0]``,
``[2]['a']``: ``ir/output_names.py``), so a caller addresses them as in eager. Which leaves
were ``None`` is fixed by the trace, as torch.export's out_spec fixes it. The archive's
metadata ``none_outputs`` lists their paths (a JSON list of the same spelling, ``["[1]",
"[2]['b']"]``); ``pt2rt.load(...).module()`` puts ``None`` back there, as
``ExportedProgram.module()`` returns it.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, List

import torch
import torch.utils._pytree as pytree

from ..errors import ExportError
from ..ir.output_names import output_names


@contextlib.contextmanager
def none_outputs_dropped(model: torch.nn.Module) -> Iterator[List[str]]:
    """Within the block, ``model(...)`` returns its output with each ``None`` leaf replaced by
    ``()`` (see the module docstring); the hook runs after the user's own forward hooks and is
    removed on exit, also on an exception. Yields the list the hook fills with the pytree paths
    (``output_names``' spelling) of the ``None`` leaves of the first output that had any.

    Raises:
        ExportError: (from the model's call) forward() returns only None.
    """
    paths: List[str] = []
    if not isinstance(model, torch.nn.Module) or isinstance(model, torch.jit.ScriptModule):
        # the capture refuses a non-Module, with its own error; a ScriptModule takes no hooks
        yield paths
        return

    def hook(module, args, out):
        leaves, spec = pytree.tree_flatten(out)
        if not any(leaf is None for leaf in leaves):
            return None
        if all(leaf is None for leaf in leaves):
            raise ExportError(f"pt2rt.export: {type(module).__name__}.forward() returns no "
                              "tensor (its outputs are all None); an archive needs at least "
                              "one tensor output")
        if not paths:
            names = output_names(spec, len(leaves))
            paths.extend(n for n, leaf in zip(names, leaves) if leaf is None)
        return pytree.tree_unflatten([() if leaf is None else leaf for leaf in leaves], spec)

    handle = model.register_forward_hook(hook)
    try:
        yield paths
    finally:
        handle.remove()
