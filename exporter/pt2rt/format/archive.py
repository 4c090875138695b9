"""The model.pt2 zip container (archive format v1; DESIGN.md "The archive").

Layout, every entry STORED (no compression) with its data starting on a 64-byte boundary::

    archive_format     "pt2rt"
    archive_version    "1"
    program.fb         FlatBuffer Program
    weights/<i>        raw little-endian bytes of weight i (Program.weights order)
    extra/<name>       free-form user files, never executed

Alignment uses Python's ``zipfile``: before each entry, the local header's extra field gets a
padding record (header id 0xD935, the "Android zipalign" id: u16 alignment + zero bytes) sized
so the data lands on the boundary; the record is well-formed, so strict readers (libzip) accept
it. ``write_archive`` saves atomically: temp file in the target directory, fsync, os.replace,
fsync of the directory. No pickle anywhere.
"""
from __future__ import annotations

import os
import struct
import tempfile
import zipfile
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..errors import FormatError
from ..ir import constants

_ALIGN_EXTRA_ID = 0xD935
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # 30 bytes
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # reproducible archives


def _padding_extra(pad: int) -> bytes:
    """A well-formed extra record of exactly ``pad`` bytes (pad == 0 or pad >= 6)."""
    if pad == 0:
        return b""
    assert pad >= 6
    return struct.pack("<HHH", _ALIGN_EXTRA_ID, pad - 4, constants.DATA_ALIGNMENT) + \
        b"\0" * (pad - 6)


def _write_aligned(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, date_time=_FIXED_TIME)
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    info.file_size = len(data)
    info.compress_size = 0  # FileHeader() reads these; _open_to_write resets them too
    info.CRC = 0
    zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT  # as ZipFile._open_to_write decides
    start = zf.start_dir
    base_len = len(info.FileHeader(zip64))
    pad = (-(start + base_len)) % constants.DATA_ALIGNMENT
    if 0 < pad < 6:
        pad += constants.DATA_ALIGNMENT
    info.extra = _padding_extra(pad)
    assert (start + len(info.FileHeader(zip64))) % constants.DATA_ALIGNMENT == 0
    with zf.open(info, mode="w", force_zip64=zip64) as dst:
        dst.write(data)


def _target_mode(path: str) -> int:
    """The saved archive's permissions: the replaced file's, else what ``open()`` gives a new
    file (0o666 & ~umask) — the same rule as the C++ writer (loader/archive_writer.cpp).
    ``mkstemp`` alone would leave 0o600."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        pass
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_archive(path: str, program: bytes, weights: Sequence[Tuple[str, bytes]],
                  extra: Optional[Mapping[str, bytes]] = None) -> None:
    """Writes the archive to ``path`` atomically (an existing file is replaced only once the
    new one is complete and synced).

    ``weights``: (entry name, bytes) in Program.weights order. ``extra``: name -> bytes, stored
    as ``extra/<name>``.

    Raises:
        ValueError: an extra name that is empty, absolute, or contains "..".
        OSError: the file cannot be written (the original, if any, is left intact).
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    entries: List[Tuple[str, bytes]] = [
        (constants.ARCHIVE_FORMAT_ENTRY, constants.ARCHIVE_FORMAT.encode()),
        (constants.ARCHIVE_VERSION_ENTRY, constants.ARCHIVE_VERSION.encode()),
        (constants.PROGRAM_ENTRY, program),
    ]
    entries += list(weights)
    for name, data in (extra or {}).items():
        if not name or name.startswith("/") or ".." in name.split("/"):
            raise ValueError(f"pt2rt: bad extra file name {name!r}")
        entries.append((constants.EXTRA_PREFIX + name, bytes(data)))
    names = [n for n, _ in entries]
    if len(set(names)) != len(names):
        raise ValueError("pt2rt: duplicate archive entry names")

    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "w+b") as f:
            with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED,
                                 allowZip64=True) as zf:
                for name, data in entries:
                    _write_aligned(zf, name, data)
            f.flush()
            os.fchmod(f.fileno(), _target_mode(path))
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # not every filesystem lets a directory be fsynced
        pass


# ---------------------------------------------------------------------------
# Reading

class ArchiveReader:
    """Read access to a model.pt2 (checks as the C++ loader does: format, version, duplicates,
    STORED and aligned entries). Use as a context manager or call ``close``."""

    def __init__(self, path: str):
        self.path = os.fspath(path)
        try:
            self.zf_ = zipfile.ZipFile(self.path, "r")
        except (zipfile.BadZipFile, OSError) as e:
            raise FormatError(f"{self.path}: not a zip archive: {e}") from e
        self.infos_: Dict[str, zipfile.ZipInfo] = {}
        for info in self.zf_.infolist():
            if info.filename in self.infos_:
                raise FormatError(f"{self.path}: duplicate entry {info.filename!r}")
            self.infos_[info.filename] = info
        fmt = self.read(constants.ARCHIVE_FORMAT_ENTRY).decode(errors="replace")
        if fmt != constants.ARCHIVE_FORMAT:
            raise FormatError(f"{self.path}: archive_format is {fmt!r}, expected "
                              f"{constants.ARCHIVE_FORMAT!r}")
        ver = self.read(constants.ARCHIVE_VERSION_ENTRY).decode(errors="replace")
        if ver != constants.ARCHIVE_VERSION:
            raise FormatError(f"{self.path}: archive_version {ver!r}, this reader handles "
                              f"{constants.ARCHIVE_VERSION!r}")

    def __enter__(self) -> "ArchiveReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.zf_.close()

    def names(self) -> List[str]:
        return list(self.infos_)

    def info(self, name: str) -> zipfile.ZipInfo:
        try:
            return self.infos_[name]
        except KeyError:
            raise FormatError(f"{self.path}: missing entry {name!r}") from None

    def data_offset(self, name: str) -> int:
        """Absolute file offset of the entry's data (from its local header)."""
        info = self.info(name)
        with open(self.path, "rb") as f:
            f.seek(info.header_offset)
            raw = f.read(_LOCAL_HEADER.size)
        if len(raw) != _LOCAL_HEADER.size:
            raise FormatError(f"{self.path}: truncated local header of {name!r}")
        fields = _LOCAL_HEADER.unpack(raw)
        if fields[0] != b"PK\x03\x04":
            raise FormatError(f"{self.path}: bad local header signature for {name!r}")
        return info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10]

    def check_layout(self, name: str) -> None:
        """Raises FormatError unless ``name`` is STORED and 64-byte aligned."""
        info = self.info(name)
        if info.compress_type != zipfile.ZIP_STORED:
            raise FormatError(f"{self.path}: entry {name!r} is compressed "
                              f"(method {info.compress_type}); pt2rt entries must be STORED")
        off = self.data_offset(name)
        if off % constants.DATA_ALIGNMENT:
            raise FormatError(f"{self.path}: entry {name!r} data at offset {off} is not "
                              f"{constants.DATA_ALIGNMENT}-byte aligned")

    def read(self, name: str) -> bytes:
        info = self.info(name)
        try:
            return self.zf_.read(info)
        except (zipfile.BadZipFile, OSError) as e:
            raise FormatError(f"{self.path}: cannot read entry {name!r}: {e}") from e

    def extra(self) -> Dict[str, bytes]:
        p = constants.EXTRA_PREFIX
        return {n[len(p):]: self.read(n) for n in self.infos_ if n.startswith(p)}
