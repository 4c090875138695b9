"""A model with keyword inputs and a nested dict output, for the signature / named-I/O tests
(tests/cpp/runtime/test_signature.cpp through tests/fixtures/make_signature_fixtures.py, and
tests/python/test_signature.py).

``KwargsDict.forward(x, *, scale)`` returns ``{"logits": [N, 4], "hidden": ([N, 8], [N])}``:
its outputs are named ``['logits']``, ``['hidden'][0]``, ``['hidden'][1]``.
"""
from __future__ import annotations

from typing import Callable, Dict, Tuple

import torch

import pt2rt
from pt2rt.format.archive import ArchiveReader, write_archive
from pt2rt.format.deserialize import read_program
from pt2rt.ir.program_ir import Program
from pt2rt.format.serialize import write_program

OUTPUT_NAMES = ["['logits']", "['hidden'][0]", "['hidden'][1]"]
BATCH = 4
MAX_BATCH = 64


class KwargsDict(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.enc = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor, *, scale: torch.Tensor) -> Dict[str, object]:
        h = torch.relu(self.enc(x * scale))
        return {"logits": self.head(h), "hidden": (h, h.sum(-1))}


class ListDict(torch.nn.Module):
    """``forward(images, batch)`` taking a list of two float32 [N, 8] tensors and a dict
    ``{"scale": [N, 8], "bias": [4]}`` (schema 1.6 input structures): user inputs
    ``images[0]``, ``images[1]``, ``batch['scale']``, ``batch['bias']``; one output [N, 4]."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.enc = torch.nn.Linear(8, 4)

    def forward(self, images, batch):
        return self.enc(images[0] * batch["scale"] + images[1]) + batch["bias"]


def list_dict_example(batch: int = BATCH, seed: int = 0):
    """(images, batch) for ListDict."""
    g = torch.Generator().manual_seed(seed)
    return ([torch.randn(batch, 8, generator=g), torch.randn(batch, 8, generator=g)],
            {"scale": torch.rand(batch, 8, generator=g) + 0.5, "bias": torch.randn(4, generator=g)})


def export_list_dict(path: str) -> torch.nn.Module:
    model = ListDict()
    pt2rt.export(model, list_dict_example()).save(path)
    return model


def example(batch: int = BATCH, seed: int = 0) -> Tuple[torch.Tensor, torch.Tensor]:
    """(x, scale): float32 [batch, 8] each."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, 8, generator=g), torch.rand(batch, 8, generator=g) + 0.5


def flat_outputs(model: torch.nn.Module, x: torch.Tensor, scale: torch.Tensor):
    """Eval-mode outputs in Plain(i) order: logits, hidden[0], hidden[1]."""
    with torch.no_grad():
        out = model.eval()(x, scale=scale)
    return [out["logits"], out["hidden"][0], out["hidden"][1]]


def export(path: str, dynamic: bool = False, **options) -> torch.nn.Module:
    """Exports KwargsDict with ``x`` positional and ``scale`` by keyword; ``dynamic``: both
    share a dynamic batch ``Dim("batch", min=1, max=64)``."""
    model = KwargsDict()
    x, scale = example()
    shapes = None
    if dynamic:
        batch = pt2rt.Dim("batch", min=1, max=MAX_BATCH)
        shapes = {"x": {0: batch}, "scale": {0: batch}}
    pt2rt.export(model, (x,), {"scale": scale}, dynamic_shapes=shapes, **options).save(path)
    return model


def rewrite(src: str, dst: str, edit: Callable[[Program], None]) -> str:
    """Copies archive ``src`` to ``dst`` through the Python reader/writer, applying
    ``edit(program)`` to the decoded Program (as tests/cli/test_verify.py's rewrite_archive)."""
    with ArchiveReader(src) as reader:
        program = read_program(reader.read("program.fb"))
        weights = [(w.entry, reader.read(w.entry)) for w in program.weights]
        extra = reader.extra()
    edit(program)
    write_archive(dst, write_program(program), weights, extra)
    return dst


def as_schema_1_3(program: Program) -> None:
    """What an exporter before schema 1.4 wrote: no output names (nor input structures)."""
    program.schema_minor = 3
    program.output_names = []
    program.inputs = []
