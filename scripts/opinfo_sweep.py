#!/usr/bin/env python3
"""PyTorch's OpInfo database as pt2rt's op-coverage test: export every differentiable OpInfo
of torch's ``op_db`` with ``pt2rt.export(..., train=True)`` and check the archive against eager
PyTorch with the Python reader and ``export-cli verify`` (tests/opinfo/opinfo_sweep.py).

    scripts/opinfo_sweep.py                         # first sample of every op, this torch
    scripts/opinfo_sweep.py --all-samples --budget 1800 -o opinfo_torch1.txt
    scripts/opinfo_sweep.py -k 'linalg\\.' --export-cli build/cli/export-cli
    scripts/opinfo_sweep.py --lane 2 --all-samples   # the same inside the torch-2 root
    scripts/opinfo_sweep.py --merge opinfo_torch1.txt opinfo_torch2.txt -o opinfo.md

``--lane 2`` re-runs this script inside ``scripts/torch2-root.sh`` (with build-torch2's
export-cli); every other option is the sweep's own (``--help`` lists them).
"""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    argv = sys.argv[1:]
    if "--lane" in argv:
        i = argv.index("--lane")
        lane = argv[i + 1] if i + 1 < len(argv) else ""
        rest = argv[:i] + argv[i + 2:]
        if lane in ("2", "torch2"):
            # The root sees the repository only (its /tmp is a tmpfs): files it writes must
            # lie inside the repository.
            for flag in ("-o", "--output", "--json"):
                if flag in rest and rest.index(flag) + 1 < len(rest):
                    out = os.path.abspath(rest[rest.index(flag) + 1])
                    if not out.startswith(REPO + os.sep):
                        print(f"opinfo_sweep: --lane 2 writes inside the torch-2 root, which "
                              f"sees only {REPO}: give {flag} a path inside it, not {out}",
                              file=sys.stderr)
                        return 2
                    rest[rest.index(flag) + 1] = out
            env = "PYTHONPATH=" + os.path.join(REPO, "exporter")
            cmd = [os.path.join(REPO, "scripts", "torch2-root.sh"), "run", "env", env,
                   "python3", os.path.abspath(__file__)] + rest
            return subprocess.call(cmd, cwd=REPO)
        if lane not in ("1", "1.13", "torch1"):
            print(f"opinfo_sweep: --lane {lane!r}: expected 1 (this machine's torch) or 2",
                  file=sys.stderr)
            return 2
        argv = rest
    try:
        import torch  # noqa: F401
    except ImportError:  # lane 1.13's torch is importable only from Debian's python3
        if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
            return subprocess.call(["/usr/bin/python3", os.path.abspath(__file__)] + argv,
                                   cwd=os.getcwd())
    sys.path.insert(0, os.path.join(REPO, "tests", "opinfo"))
    sys.path.insert(0, os.path.join(REPO, "exporter"))
    import opinfo_sweep
    return opinfo_sweep.main(argv)


if __name__ == "__main__":
    sys.exit(main())
