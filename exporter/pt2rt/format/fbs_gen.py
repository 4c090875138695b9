"""Generate the FlatBuffers Python bindings of schema/pt2rt.fbs into ``pt2rt/fb/``.

The bindings are build output (not committed). ``ensure_bindings()`` regenerates them when
missing or older than the schema; the CMake target ``pt2rt_schema_py`` runs
``python3 -m pt2rt.format.fbs_gen``. Needs ``flatc`` (Debian: flatbuffers-compiler).

Raises:
    RuntimeError: flatc is not installed or fails, naming the command.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # pt2rt/ (this file: pt2rt/format/)
SCHEMA = PACKAGE_DIR.parent.parent / "schema" / "pt2rt.fbs"
OUT_DIR = PACKAGE_DIR / "fb"
_STAMP = OUT_DIR / ".schema_mtime"


def _up_to_date() -> bool:
    if not (OUT_DIR / "Program.py").exists() or not _STAMP.exists():
        return False
    if not SCHEMA.exists():  # installed without the schema: trust what is there
        return True
    return _STAMP.read_text().strip() == str(SCHEMA.stat().st_mtime_ns)


def ensure_bindings() -> None:
    """Make ``pt2rt.fb`` importable, running flatc if the bindings are stale."""
    if _up_to_date():
        return
    flatc = shutil.which("flatc")
    if flatc is None:
        raise RuntimeError("pt2rt: flatc not found; install Debian package flatbuffers-compiler "
                           "(scripts/install-deps.sh) to generate the schema bindings")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [flatc, "--python", "-o", tmp, str(SCHEMA)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"pt2rt: {' '.join(cmd)} failed: {proc.stderr.strip()}")
        staged = Path(tmp) / "pt2rt" / "fb"
        (staged / "__init__.py").touch()
        _STAMP_tmp = staged / ".schema_mtime"
        _STAMP_tmp.write_text(str(SCHEMA.stat().st_mtime_ns))
        # Replace atomically enough for concurrent test processes: build beside, then swap.
        target_tmp = Path(tempfile.mkdtemp(prefix=".fb-", dir=PACKAGE_DIR))
        shutil.rmtree(target_tmp)
        shutil.copytree(staged, target_tmp)
        if OUT_DIR.exists():
            old = Path(tempfile.mkdtemp(prefix=".fb-old-", dir=PACKAGE_DIR))
            shutil.rmtree(old)
            try:
                os.rename(OUT_DIR, old)
            except FileNotFoundError:
                pass
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.rename(target_tmp, OUT_DIR)
        except OSError:  # another process won the race; theirs is equally fresh
            shutil.rmtree(target_tmp, ignore_errors=True)


if __name__ == "__main__":
    ensure_bindings()
