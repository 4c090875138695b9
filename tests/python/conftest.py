"""Shared fixtures: each (model, partitioner) is exported and saved once per session.

Run from the repository root:
``PYTHONPATH=exporter:tests/python /usr/bin/python3 -m pytest -q tests/python``
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Dict, Tuple

import pytest
import torch

_HERE = os.path.dirname(os.path.abspath(__file__))
_EXPORTER = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "exporter")
for p in (_HERE, _EXPORTER):
    if p not in sys.path:
        sys.path.insert(0, p)

import pt2rt  # noqa: E402
import models  # noqa: E402

# Tiny tensors: one intra-op thread is fastest and does not spin against other test processes.
torch.set_num_threads(1)


@dataclass
class Exported:
    name: str
    partitioner: str
    model: torch.nn.Module          # the model export was called on (must be left unchanged)
    args: Tuple[torch.Tensor, ...]
    exported: "pt2rt.ExportedArchive"
    path: str
    loaded: "pt2rt.LoadedArchive"


class ExportCache:
    def __init__(self, root):
        self.root_ = root
        self.cache_: Dict[Tuple[str, str], Exported] = {}

    def get(self, name: str, partitioner: str = "default") -> Exported:
        key = (name, partitioner)
        if key not in self.cache_:
            model, args = models.build(name)
            exported = pt2rt.export(model, args, partitioner=partitioner)
            path = str(self.root_ / f"{name}-{partitioner}.pt2")
            exported.save(path)
            self.cache_[key] = Exported(name, partitioner, model, args, exported, path,
                                        pt2rt.load(path))
        return self.cache_[key]


@pytest.fixture(scope="session")
def exports(tmp_path_factory) -> ExportCache:
    return ExportCache(tmp_path_factory.mktemp("archives"))
