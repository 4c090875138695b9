"""``python -m pt2rt save`` / ``inspect`` through a real subprocess."""
from __future__ import annotations

import os
import subprocess
import sys

import torch

import pt2rt
from pt2rt.ir.graph_ir import GraphRole

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _run(*argv, cwd=ROOT):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(ROOT, "exporter"), HERE,
                                         env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    return subprocess.run([sys.executable, "-m", "pt2rt", *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_save_from_file_callable(tmp_path):
    out = tmp_path / "cnn.pt2"
    proc = _run("save", os.path.join("tests", "python", "models.py") + ":build_cnn_bn", str(out),
                "--partitioner", "min_cut")
    assert proc.returncode == 0, proc.stderr
    assert "Forward" in proc.stdout and "Backward" in proc.stdout and "weights:" in proc.stdout
    loaded = pt2rt.load(str(out))
    assert [g.role for g in loaded.program.graphs] == [GraphRole.Inference, GraphRole.Forward,
                                                       GraphRole.Backward]
    assert loaded.program.metadata["partitioner"] == "min_cut"
    proc = _run("inspect", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "graph Backward" in proc.stdout


def test_save_module_callable_with_inputs_file(tmp_path):
    (tmp_path / "mymodel.py").write_text(
        "import torch\n"
        "def make():\n"
        "    torch.manual_seed(0)\n"
        "    return torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Tanh())\n")
    inputs = tmp_path / "in.pt"
    x = torch.randn(2, 5)
    torch.save((x,), str(inputs))
    out = tmp_path / "m.pt2"
    proc = _run("save", "mymodel:make", str(out), "--inputs", str(inputs), "--no-train",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    loaded = pt2rt.load(str(out))
    assert [g.role for g in loaded.program.graphs] == [GraphRole.Inference]
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.Tanh()).eval()
    torch.testing.assert_close(loaded.run_inference(x)[0], ref(x).detach())


def test_bad_usage_and_export_errors(tmp_path):
    proc = _run("save", "no_colon_here", str(tmp_path / "x.pt2"))
    assert proc.returncode == 2 and "<file.py or module>:<callable>" in proc.stderr
    proc = _run("save", "tests/python/models.py:MLP", str(tmp_path / "x.pt2"))
    assert proc.returncode == 2 and "--inputs" in proc.stderr
    (tmp_path / "bad.py").write_text("def build():\n    return 'not a model', ()\n")
    proc = _run("save", str(tmp_path / "bad.py") + ":build", str(tmp_path / "x.pt2"))
    assert proc.returncode == 1 and "torch.nn.Module" in proc.stderr
    assert not (tmp_path / "x.pt2").exists()


def test_save_with_a_dynamic_dim_prints_its_summary(tmp_path):
    """The summary after `save --dynamic` counted saved activations by their static sizes and
    crashed on a SymInt saved for backward ('NoneType' object has no attribute 'sizes') after
    the archive was written."""
    out = tmp_path / "dyn.pt2"
    proc = _run("save", os.path.join("examples", "digits", "model.py") + ":build", str(out),
                "--dynamic", "x:0=batch[1,64]")
    assert proc.returncode == 0, proc.stderr
    assert "saved for backward:" in proc.stdout and "Traceback" not in proc.stderr
    assert pt2rt.load(str(out)).program.range_constraints[0].max == 64
