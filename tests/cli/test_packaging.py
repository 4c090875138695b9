"""Packaging: `export-cli --version` / `python -m pt2rt --version` agree; archives written by
the Python exporter and by the C++ writer get the same permissions (0666 & ~umask for a new
file, the replaced file's otherwise)."""
import os
import stat
import subprocess
import sys

import torch

from pt2rt.ir import constants

EXPORTER = os.path.join(os.path.dirname(__file__), "..", "..", "exporter")


def _python_version_text():
    env = dict(os.environ, PYTHONPATH=EXPORTER)
    r = subprocess.run([sys.executable, "-m", "pt2rt", "--version"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_versions_agree(cli):
    cpp = cli.ok("--version").out.splitlines()
    py = _python_version_text().splitlines()
    schema = f"schema {constants.SCHEMA_MAJOR}.{constants.SCHEMA_MINOR}"
    assert cpp[0].startswith("export-cli (pt2rt) ") and py[0].startswith("pt2rt ")
    assert cpp[0].split()[-1] == py[0].split()[-1]  # the same pt2rt version
    assert cpp[1] == py[1] and schema in cpp[1]
    assert cpp[2].startswith("LibTorch ") and py[2].startswith(f"torch {torch.__version__}")
    assert "--version" in cli.ok("--help").out


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_python_and_cpp_writers_give_the_same_permissions(cli, archives, tmp_path):
    import models
    import pt2rt
    model, args = models.build("mlp")
    data = tmp_path / "train.pt"
    torch.save((torch.randn(8, 16), torch.randint(0, 10, (8,))), str(data))
    old = os.umask(0o027)
    try:
        py = tmp_path / "py.pt2"
        pt2rt.export(model, args, bundle_examples=False).save(str(py))
        cpp = tmp_path / "cpp.pt2"
        cli.ok("train", py, "--data", data, "--epochs", "1", "--save", cpp)
        assert _mode(py) == _mode(cpp) == 0o640
        # replacing a file keeps its permissions, on both sides
        os.chmod(py, 0o604)
        os.chmod(cpp, 0o604)
        pt2rt.export(model, args, bundle_examples=False).save(str(py))
        cli.ok("train", py, "--data", data, "--epochs", "1", "--save", cpp)
        assert _mode(py) == _mode(cpp) == 0o604
    finally:
        os.umask(old)


def test_save_failure_is_one_line_unless_verbose(tmp_path):
    src = tmp_path / "bad_model.py"
    src.write_text("def build():\n    raise RuntimeError('cannot build\\nsecond line')\n")
    env = dict(os.environ, PYTHONPATH=EXPORTER)
    cmd = [sys.executable, "-m", "pt2rt"]
    out = str(tmp_path / "x.pt2")
    r = subprocess.run(cmd + ["save", f"{src}:build", out], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "pt2rt: error: RuntimeError: cannot build ... (--verbose: the full message and "
        "traceback)"], r.stderr
    r = subprocess.run(cmd + ["--verbose", "save", f"{src}:build", out], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 1
    assert "Traceback (most recent call last)" in r.stderr and "second line" in r.stderr
    assert not os.path.exists(out)


def test_cli_save_failure_hands_verbose_on(cli, tmp_path):
    src = tmp_path / "bad_model.py"
    src.write_text("def build():\n    raise RuntimeError('cannot build')\n")
    r = cli("save", f"{src}:build", tmp_path / "x.pt2")
    assert r.rc == 2 and "Traceback" not in r.err, str(r)
    assert "pt2rt: error: RuntimeError: cannot build" in r.err
    r = cli("save", f"{src}:build", tmp_path / "x.pt2", "--verbose")
    assert r.rc == 2 and "Traceback (most recent call last)" in r.err, str(r)
