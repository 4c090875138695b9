"""Fixtures for the export-cli end-to-end tests (tests/cli, one ctest entry per file).

Environment (set by tests/CMakeLists.txt): PT2RT_CLI (export-cli), PT2RT_FINETUNE and
PT2RT_FINETUNE_DDP (the finetune examples), PYTHONPATH with exporter/ and tests/python. Archives are exported at
test time with pt2rt.export from tests/python/models.py and examples/digits/model.py.

Run one file by hand:
    PT2RT_CLI=build/cli/export-cli PYTHONPATH=exporter:tests/python \
        /usr/bin/python3 -m pytest -q tests/cli/test_inspect.py
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
for p in (ROOT / "exporter", ROOT / "tests" / "python", ROOT / "examples" / "digits"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import pt2rt  # noqa: E402
import models  # noqa: E402

torch.set_num_threads(1)


def _tool(env: str, default: str) -> str:
    path = os.environ.get(env) or str(ROOT / "build" / default)
    if not os.path.exists(path):
        pytest.exit(f"{env} not found at {path}: build it and set {env}", returncode=1)
    return path


@dataclass
class Result:
    rc: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


class Cli:
    """Runs export-cli and returns exit code, stdout and stderr."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self, *args: str, env: Dict[str, str] = None, timeout: float = 600) -> Result:
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        proc = subprocess.run([self.path, *map(str, args)], capture_output=True, text=True,
                              env=full_env, timeout=timeout, stdin=subprocess.DEVNULL)
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *args: str, **kw) -> Result:
        r = self(*args, **kw)
        assert r.rc == 0, str(r)
        return r

    def usage_error(self, *args: str, mentions: Sequence[str] = (), **kw) -> Result:
        """Expects exit 2 with exactly one line on stderr that contains every `mentions`."""
        r = self(*args, **kw)
        assert r.rc == 2, str(r)
        lines = [line for line in r.err.splitlines() if line.strip()]
        assert len(lines) == 1, f"expected one line on stderr:\n{r}"
        assert "Traceback" not in r.err and "Exception raised from" not in r.err, str(r)
        for m in mentions:
            assert m in lines[0], f"stderr does not mention {m!r}:\n{r}"
        return r


def run_ranks(cmd: Sequence, world: int = 2, timeout: float = 300) -> List[str]:
    """Runs `cmd` as `world` local processes with torchrun's variables (RANK, WORLD_SIZE,
    MASTER_ADDR=127.0.0.1, a free MASTER_PORT); asserts they all exit 0 and returns each
    rank's stdout."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    procs = [subprocess.Popen(list(map(str, cmd)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "RANK": str(r), "WORLD_SIZE": str(world),
                                   "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
             for r in range(world)]
    outs = [p.communicate(timeout=timeout) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    return [out for out, _ in outs]


@pytest.fixture(scope="session")
def cli() -> Cli:
    return Cli(_tool("PT2RT_CLI", "cli/export-cli"))


@pytest.fixture(scope="session")
def finetune_bin() -> str:
    return _tool("PT2RT_FINETUNE", "examples/digits/finetune")


@dataclass
class Exported:
    name: str
    path: Path
    model: torch.nn.Module
    args: tuple


class Archives:
    """Each model of tests/python/models.py exported once per session (lazily)."""

    def __init__(self, root: Path):
        self.root = root
        self.cache: Dict[str, Exported] = {}

    def get(self, name: str) -> Exported:
        if name not in self.cache:
            model, args = models.build(name)
            path = self.root / f"{name}.pt2"
            pt2rt.export(model, args).save(str(path))
            self.cache[name] = Exported(name, path, model, args)
        return self.cache[name]


@pytest.fixture(scope="session")
def archives(tmp_path_factory) -> Archives:
    return Archives(tmp_path_factory.mktemp("archives"))


def save_tensors(path: Path, obj) -> Path:
    torch.save(obj, str(path))
    return path


def eager_train_step(model: torch.nn.Module, args: tuple, grad_outputs: List[torch.Tensor]):
    """Outputs, parameter grads (FQN -> grad) and buffers after one eager training step on a
    copy of `model` (the original is left unchanged)."""
    import copy
    m = copy.deepcopy(model).train()
    outs = m(*args)
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    diff = [o for o in outs if o.is_floating_point() and o.requires_grad]
    torch.autograd.backward(diff, grad_outputs or [torch.ones_like(o) for o in diff])
    grads = {n: p.grad for n, p in m.named_parameters() if p.requires_grad}
    buffers = {n: b.detach().clone() for n, b in m.named_buffers()}
    return [o.detach() for o in outs], grads, buffers


@dataclass
class NamedOutputs:
    """tests/python/signature_models.py's KwargsDict: forward(x, *, scale) -> {"logits":
    [4, 4], "hidden": ([4, 8], [4])}, outputs named signature_models.OUTPUT_NAMES."""
    path: Path         # schema 1.4: the names stored
    path_1_3: Path     # the same archive as written before schema 1.4: no names ("[i]")
    model: torch.nn.Module


@pytest.fixture(scope="session")
def named_outputs(tmp_path_factory) -> NamedOutputs:
    import signature_models
    work = tmp_path_factory.mktemp("named_outputs")
    path = work / "kwargs_dict.pt2"
    model = signature_models.export(str(path))
    old = signature_models.rewrite(str(path), str(work / "kwargs_dict_1_3.pt2"),
                                   signature_models.as_schema_1_3)
    return NamedOutputs(path, Path(old), model)
