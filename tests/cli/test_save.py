"""export-cli save: runs the Python exporter, streams its output, fails clearly."""
import json
import re
import os
import stat

import pytest

from conftest import ROOT

DIGITS_MODEL = ROOT / "examples" / "digits" / "model.py"


def test_save_a_file_spec(cli, tmp_path):
    out = tmp_path / "digits.pt2"
    r = cli.ok("save", f"{DIGITS_MODEL}:build", out)
    assert f"wrote {out}" in r.out  # the exporter's own output, streamed through
    # progress of each stage as it starts and ends (a long export is not silent)
    assert re.search(r"^pt2rt save: capturing DigitsCNN with torch \S+ \(training graphs, "
                     r"inference graph\)$", r.out, re.M), r.out
    assert re.search(r"^pt2rt save: captured inference \(\d+ nodes\), forward \(\d+ nodes\), "
                     r"backward \(\d+ nodes\) in [\d.]+ s$", r.out, re.M), r.out
    assert r.err == "", r.err
    j = json.loads(cli.ok("inspect", out, "--json").out)
    assert j["signature"]["inputs"][0]["shape"] == [32, 1, 8, 8]
    assert "OK:" in cli.ok("verify", out).out


def test_save_a_module_spec_with_options(cli, tmp_path):
    out = tmp_path / "mlp.pt2"
    # tests/python is on PYTHONPATH (ctest environment), so `models` is importable
    cli.ok("save", "models:build_mlp", out, "--partitioner", "min_cut", "--no-inference")
    j = json.loads(cli.ok("inspect", out, "--json").out)
    assert sorted(g["role"] for g in j["graphs"]) == ["backward", "forward"]
    assert j["metadata"].get("partitioner") == "min_cut"


def test_save_inference_only_with_inputs_file(cli, tmp_path):
    import torch
    inputs = tmp_path / "in.pt"
    torch.save((torch.randn(2, 16),), str(inputs))
    spec = tmp_path / "only_model.py"
    spec.write_text("import torch\n"
                    "def make():\n"
                    "    torch.manual_seed(0)\n"
                    "    return torch.nn.Linear(16, 3)\n")
    out = tmp_path / "lin.pt2"
    cli.ok("save", f"{spec}:make", out, "--inputs", inputs, "--no-train")
    j = json.loads(cli.ok("inspect", out, "--json").out)
    assert [g["role"] for g in j["graphs"]] == ["inference"]
    assert j["signature"]["inputs"][0]["shape"] == [2, 16]


def test_usage_errors(cli, tmp_path):
    cli.usage_error("save", mentions=["<file.py|module>:<callable>"])
    cli.usage_error("save", f"{DIGITS_MODEL}:build", mentions=["<out.pt2>"])
    cli.usage_error("save", "no_colon_here", tmp_path / "o.pt2", mentions=["no_colon_here"])
    cli.usage_error("save", f"{tmp_path}/missing.py:build", tmp_path / "o.pt2",
                    mentions=["missing.py"])
    cli.usage_error("save", f"{DIGITS_MODEL}:build", tmp_path / "o.pt2", "--partitioner", "fast",
                    mentions=["fast"])
    cli.usage_error("save", f"{DIGITS_MODEL}:build", tmp_path / "o.pt2", "--inputs",
                    tmp_path / "nope.pt", mentions=["nope.pt"])


def test_python_without_torch(cli, tmp_path):
    fake = tmp_path / "python-without-torch"
    fake.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named torch' >&2\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    cli.usage_error("save", f"{DIGITS_MODEL}:build", tmp_path / "o.pt2",
                    env={"PT2RT_PYTHON": str(fake)}, mentions=["PT2RT_PYTHON", "torch"])
    assert not (tmp_path / "o.pt2").exists()


def test_exporter_failure_is_reported(cli, tmp_path):
    spec = tmp_path / "broken.py"
    spec.write_text("def build():\n    raise RuntimeError('model factory exploded')\n")
    out = tmp_path / "o.pt2"
    r = cli("save", f"{spec}:build", out)
    assert r.rc == 2, str(r)
    assert "model factory exploded" in r.err  # the exporter's message, streamed
    assert r.err.strip().splitlines()[-1].startswith("export-cli save: error: the exporter failed")
    assert not out.exists()
