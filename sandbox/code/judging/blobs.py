"""A content-addressed store for large expected values.

A reference output can be megabytes (HumanEval/15's strings, HumanEval/130's lists); shipping
every one inside every grading request, as text, cost more than running the program. Large
encoded values are written once under the cache directory, named by their BLAKE2b digest; a test
carries only the digest and the size. The judge compares a result's digest first (equal bytes,
the common case, need no read at all) and reads the file only to compare structurally, checking
that its content still hashes to the name, so a client can make the judge read nothing but
values this store holds.

``_thread``, not ``threading``, names the writing thread: ``threading`` registers a handler that
runs in every child forked after it loads and touches its objects (~160 copy-on-write page
faults per sandbox when judges forked their zygote after importing this module).
"""

from __future__ import annotations

import hashlib
import os
from _thread import get_ident
from pathlib import Path

#: Encoded values up to this size travel inside the request; larger ones by digest.
INLINE_MAX = 64 << 10


def cache_root() -> Path:
    root = os.environ.get("RLVR_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "rlvr")
    return Path(root)


def digest(data: bytes | memoryview) -> str:
    return hashlib.blake2b(data, digest_size=32).hexdigest()


def _path(name: str) -> Path:
    if len(name) != 64 or any(c not in "0123456789abcdef" for c in name):
        raise ValueError("not a blob digest")
    return cache_root() / "blobs" / name[:2] / f"{name}.bin"


def store(data: bytes) -> str:
    """Write ``data`` (if not yet there) and return its digest."""
    name = digest(data)
    path = _path(name)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}-{get_ident()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    return name


def exists(name: str) -> bool:
    """Is a blob stored under ``name``? ``ValueError`` if ``name`` is not a digest."""
    return _path(name).exists()


#: Blobs this process has read whole and found intact: digest -> the file's (device, inode,
#: size, modification time) then. ``check`` reads a blob again only when its file changed.
_INTACT: dict[str, tuple[int, int, int, int]] = {}


def check(name: str) -> None:
    """Raise as ``load`` would if the blob is absent or does not hash to its name; a corrupt
    blob is removed, so the value computed again is stored again (``store`` keeps a file that
    exists). A cached reference checks its blobs each time it is loaded (a HumanEval+ load
    reads ~250 MB); in one process a file is hashed again only when its device, inode, size or
    modification time changed (a rewrite in place that keeps all four is found when the judge
    reads the blob, ``load``)."""
    _INTACT[name] = _read_intact(name, _INTACT.get(name))[1]


def load(name: str) -> bytes:
    """The bytes stored under ``name``; ``FileNotFoundError`` if absent, ``ValueError`` if the
    file does not hash to its name (it is then removed, as by ``check``, so that whoever
    computed it stores it again)."""
    data, _ = _read_intact(name)
    assert data is not None
    return data


def _read_intact(
    name: str, trusted: tuple[int, int, int, int] | None = None
) -> tuple[bytes | None, tuple[int, int, int, int]]:
    """The blob's bytes and its file's (device, inode, size, modification time), read through
    one open file; None for the bytes when that stamp is ``trusted`` (read and found intact
    before). A file that does not hash to its name is removed (``_remove_if_same``) and
    ``ValueError`` raised."""
    path = _path(name)
    with open(path, "rb") as fh:
        stat = os.fstat(fh.fileno())
        stamp = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if stamp == trusted:
            return None, stamp
        data = fh.read()
    try:
        return _intact(name, data), stamp
    except ValueError:
        _remove_if_same(path, stat)
        raise


def _remove_if_same(path: Path, stat: os.stat_result) -> None:
    """Remove the file read as corrupt, unless another process has stored a new one since."""
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return
    if (now.st_dev, now.st_ino) == (stat.st_dev, stat.st_ino):
        path.unlink(missing_ok=True)


def _intact(name: str, data: bytes) -> bytes:
    """``data``, if it hashes to ``name``; else ``ValueError``."""
    if digest(data) != name:
        raise ValueError(f"blob {name[:12]} is corrupt")
    return data
