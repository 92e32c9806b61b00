"""Where commands write: checks that turn a bad output path into one line before any work, and
that keep a command from writing over its own input.

No command deletes or replaces what it did not make: outputs that would land on an input are
refused, a directory argument that is a file (or sits under one) is refused, and a directory is
replaced only on request (``--overwrite``) and then atomically (``replace_dir``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rlvr.harness.errors import UserError


def output_dir(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as a directory a command may create or write into. A file there, or a file
    anywhere above it, is refused with one line (instead of ``FileExistsError`` / ``NotADirectoryError``)."""
    p = Path(path).expanduser()
    for candidate in (p, *p.parents):
        if candidate.exists() or candidate.is_symlink():
            if candidate.is_dir():
                return p
            if candidate == p:
                raise UserError(f"{flag} {path} is a file, not a directory; pass a directory (created if missing)")
            raise UserError(
                f"{flag} {path}: {candidate} is a file, so nothing can be created under it; choose another path"
            )
    return p


def output_file(path: str | Path, flag: str = "--output") -> Path:
    """``path`` as a file a command may create: its directory must be creatable and it must not be a directory."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise UserError(f"{flag} {path} is a directory; name a file")
    output_dir(p.parent, flag)
    return p


def same_file(a: str | Path, b: str | Path) -> bool:
    """Do two paths name one file (relative, through symlinks, or hard links)?"""
    a, b = Path(a).expanduser(), Path(b).expanduser()
    if a.exists() and b.exists():
        try:
            return os.path.samefile(a, b)
        except OSError:
            pass
    return a.resolve() == b.resolve()


def inside(child: str | Path, parent: str | Path) -> bool:
    """Is ``child`` ``parent`` itself or somewhere below it (paths resolved)?"""
    child, parent = Path(child).resolve(), Path(parent).resolve()
    return child == parent or parent in child.parents


@contextmanager
def replace_dir(out: str | Path, overwrite: bool, flag: str = "--out") -> Iterator[Path]:
    """Build a directory's new contents in a fresh temporary sibling and move it into place when
    the block succeeds; the block's failure leaves ``out`` as it was (and no temporary behind).

    An existing ``out`` that holds anything is refused unless ``overwrite``; then the old one is
    set aside, the new one renamed in, and only then the old one deleted."""
    out = output_dir(out, flag)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise UserError(f"{flag} {out} is not empty; pass --overwrite to replace it, or choose a new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    tmp = out.parent / f".{out.name}.tmp-{tag}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = out.parent / f".{out.name}.old-{tag}"
    if out.exists():
        out.rename(old)
    try:
        tmp.rename(out)
    except BaseException:
        if old.exists():
            old.rename(out)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
