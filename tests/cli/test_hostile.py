"""export-cli on hostile archives (issue 8): terminal-safe output, one-line errors, and the
run bounds measured as a user meets them.

The archives are the reproducers of tests/cpp/hostile/reproducers.cpp, written at test time by
``pt2rt_make_reproducers`` into ``$PT2RT_FIXTURES_DIR/hostile`` (ctest fixture
``pt2rt_hostile_fixtures``).

The run-bound test is the acceptance check "loading, running and verifying any archive of at
most 1 MB takes at most 2 s and 256 MB whatever its content": each adversarial archive goes
through ``export-cli verify`` in its own process, whose peak RSS (``ru_maxrss``) and CPU time
are measured; a table of the figures is printed (``pytest -s``).
"""
from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

import pytest

HOSTILE = Path(os.environ.get("PT2RT_FIXTURES_DIR", "build/fixtures")) / "hostile"
CONTROL = [bytes([c]) for c in range(0x20) if c not in (0x0a, 0x09)] + [b"\xc2\x9b"]


def archive(name: str) -> Path:
    path = HOSTILE / name
    if not path.exists():
        pytest.skip(f"{path} is missing: run ctest -R hostile_reproducers first")
    return path


def assert_terminal_safe(text: bytes) -> None:
    for c in CONTROL:
        assert c not in text, f"control byte {c!r} reached the terminal:\n{text!r}"


def run_bytes(cli, *args: str):
    proc = subprocess.run([cli.path, *map(str, args)], capture_output=True, timeout=600,
                          stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout, proc.stderr


def test_inspect_escapes_archive_text(cli):
    rc, out, err = run_bytes(cli, "inspect", archive("escape_text.pt2"))
    assert rc == 0, err
    assert_terminal_safe(out + err)
    text = out.decode()
    assert "x\\x1b[2J\\x1b[H" in text  # the value name, escaped
    assert "\\x1b]52;c;cHduZWQ=\\x07 clipboard" in text  # OSC 52 (clipboard) metadata
    rc, out, err = run_bytes(cli, "inspect", "--graph", "inference", archive("escape_text.pt2"))
    assert rc == 0, err
    assert_terminal_safe(out + err)


def test_inspect_json_stays_valid_json(cli):
    import json
    rc, out, err = run_bytes(cli, "inspect", "--json", archive("escape_text.pt2"))
    assert rc == 0, err
    assert_terminal_safe(out)
    facts = json.loads(out)
    assert facts["metadata"]["note\x1b[8m"].startswith("\x1b]52")  # escaped as \\u001b in JSON
    rc, out, err = run_bytes(cli, "inspect", "--graph", "inference", "--json",
                             archive("escape_text.pt2"))
    assert rc == 0, err
    assert_terminal_safe(out)
    graph = json.loads(out)
    assert graph["inputs"][0]["name"] == "x\x1b[2J\x1b[H"
    assert graph["nodes"][0]["name"] == "relu\r\nOK: 99 checks match"
    assert graph["nodes"][0]["op"] == "aten::relu.\x1b[5mblink"


@pytest.mark.parametrize("sub", ["run", "verify"])
def test_errors_are_one_escaped_line(cli, sub):
    r = cli.usage_error(sub, archive("escape_text.pt2"),
                        mentions=["not available in the running LibTorch", "aten::relu.\\x1b[5mblink",
                                  "--verbose"])
    assert_terminal_safe(r.err.encode())


def test_verbose_prints_the_whole_error_still_escaped(cli):
    rc, out, err = run_bytes(cli, "run", archive("from_file_fill.pt2"), "--verbose")
    assert rc == 2
    lines = err.decode().splitlines()
    assert len(lines) > 1
    assert "aten::from_file: maps or reads a file" in err.decode()
    rc, out, err = run_bytes(cli, "run", archive("from_file_fill.pt2"))
    assert rc == 2 and len(err.decode().splitlines()) == 1
    assert "refused by pt2rt's operator policy: aten::from_file, aten::fill_.Scalar" in err.decode()


def test_allow_op_is_the_explicit_override(cli):
    r = cli.usage_error("run", archive("from_file_fill.pt2"), "--allow-op", "aten::fill_.Scalar",
                        mentions=["1 operator is refused", "aten::from_file"])
    assert "fill_" not in r.err


@pytest.mark.parametrize("name,mentions", [
    ("deflated_program.pt2", ["'program.fb' is compressed"]),
    ("deflate_program_4g.pt2", ["'program.fb' is compressed"]),
    ("traversal_name.pt2", ["outside the archive layout"]),
    ("tangent_without_meta.pt2", ["declares no tensor shape"]),
    ("sym_floordiv_overflow.pt2", ["overflows int64"]),
])
def test_hostile_archives_fail_with_one_line(cli, name, mentions):
    for sub in ("run", "verify"):
        cli.usage_error(sub, archive(name), mentions=mentions)
    if "program" in name:
        cli.usage_error("inspect", archive(name), mentions=mentions)


def test_execution_errors_are_one_line_with_details_behind_verbose(cli, tmp_path):
    """A view of the caller's input that would read past its storage: ExecutionError at run."""
    import torch
    path = archive("reshape_alias_view.pt2")  # x[2] -> _reshape_alias(x, [2], [1])
    inputs = tmp_path / "in.pt"
    torch.save((torch.ones(1).expand(2),), str(inputs))
    r = cli("run", path, "--inputs", inputs)
    assert r.rc == 2 and len(r.err.strip().splitlines()) == 1, str(r)


def test_any_archive_up_to_1mb_verifies_within_2s_and_256mb(cli):
    helper = (
        "import resource, subprocess, sys, time\n"
        "t0 = time.monotonic()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, stdin=subprocess.DEVNULL)\n"
        "w = time.monotonic() - t0\n"
        "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(p.returncode, w, u.ru_utime + u.ru_stime, u.ru_maxrss * 1024)\n"
        "sys.stderr.write(p.stderr.decode(errors='replace'))\n")
    rows = []
    names = sorted(p.name for p in HOSTILE.glob("*.pt2"))
    assert len(names) >= 20, "reproducers missing: run ctest -R hostile_reproducers"
    for name in names:
        path = HOSTILE / name
        assert path.stat().st_size <= 1 << 20, name
        # --allow-no-examples: an archive without bundled examples is not a verify failure here
        proc = subprocess.run(["/usr/bin/python3", "-c", helper, cli.path, "verify", str(path),
                               "--device", "cpu", "--allow-no-examples"], capture_output=True,
                              timeout=120,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
        rc, wall, cpu, rss = proc.stdout.decode().split()
        rc, wall, cpu, rss = int(rc), float(wall), float(cpu), int(rss)
        err = proc.stderr.decode()
        rows.append((name, path.stat().st_size, rc, wall, cpu, rss / 2**20,
                     err.strip().splitlines()[0][:90] if err.strip() else "ok"))
        assert rc in (0, 2), f"{name}: exit {rc}\n{err}"  # never a crash, never a signal
        assert rss <= 256 * 2**20, f"{name}: peak RSS {rss / 2**20:.0f} MiB"
        assert cpu <= 2.0, f"{name}: {cpu:.2f} s of CPU"
    print(f"\n{'archive':<40} {'bytes':>8} {'exit':>4} {'wall s':>7} {'CPU s':>6} {'RSS MiB':>8}  result")
    for r in rows:
        print(f"{r[0]:<40} {r[1]:>8} {r[2]:>4} {r[3]:>7.2f} {r[4]:>6.2f} {r[5]:>8.0f}  {r[6]}")
