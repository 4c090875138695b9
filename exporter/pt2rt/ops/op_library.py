"""Defining pt2rt's own dispatcher ops (``pt2rt::``) on either torch lane: a FRAGMENT of the
``pt2rt`` namespace (other modules define other ops in it), Python kernels per dispatch key and
a shape rule for fake / meta tensors.

torch 2.x: ``torch.library.Library(ns, "FRAGMENT")`` and ``torch.library.register_fake``.
torch 1.13: its ``torch.library.Library`` accepts only DEF and IMPL, so the C binding
(``torch._C._dispatch_library``) makes the fragment; the shape rule is the op's Meta kernel
and, because 1.13's ``FakeTensorMode`` runs ops on symbolic sizes only through the Python rules
of ``torch._meta_registrations.meta_table`` (torch/_subclasses/fake_tensor.py), an entry there
too — pt2rt's own ops, so the entries stay for the life of the process."""
from __future__ import annotations

from typing import Any, Callable

import torch

NAMESPACE = "pt2rt"
TORCH2 = int(torch.__version__.split(".")[0]) >= 2


class Fragment:
    """A ``pt2rt`` library fragment; keep it alive as long as its ops are used."""

    def __init__(self) -> None:
        if TORCH2:
            self.lib: Any = torch.library.Library(NAMESPACE, "FRAGMENT")
        else:
            self.lib = torch._C._dispatch_library("FRAGMENT", NAMESPACE, "", __file__, 0)

    def define(self, schema: str) -> None:
        self.lib.define(schema)

    def impl(self, name: str, fn: Callable, key: str) -> None:
        if TORCH2:
            self.lib.impl(name, fn, key)
        else:
            self.lib.impl(name, key, fn)

    def shape_rule(self, name: str, fn: Callable) -> None:
        """``fn`` computes ``pt2rt::<name>``'s results on fake / meta tensors."""
        if TORCH2:
            torch.library.register_fake(f"{NAMESPACE}::{name}", fn, lib=self.lib)
            return
        self.impl(name, fn, "Meta")
        from torch._meta_registrations import meta_table
        meta_table[getattr(getattr(torch.ops, NAMESPACE), name).default] = fn


def defined(name: str) -> bool:
    """Whether ``pt2rt::<name>`` is defined in this process."""
    try:
        getattr(getattr(torch.ops, NAMESPACE), name).default
        return True
    except (AttributeError, RuntimeError):
        return False
