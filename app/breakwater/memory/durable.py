"""Writes that survive a crash: every byte we report as written has been fsynced."""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Iterator

_SUFFIX_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a created, renamed or removed file) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_durably(path: Path, text: str) -> None:
    created = not path.exists()
    with open(path, "ab") as fh:
        fh.write(text.encode("utf-8"))
        fh.flush()
        os.fsync(fh.fileno())
    if created:
        fsync_dir(path.parent)


def write_atomically(path: Path, text: str, temp_prefix: str = ".tmp-", before_replace=None) -> None:
    """Replace `path` by `text` so that a reader, or a crash, sees the old file or the new one.

    The temporary file lives in the same directory (so `os.replace` is a rename, not a copy)
    and its name never matches a memory file.
    """
    tmp = path.parent / f"{temp_prefix}{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _candidates(directory: Path, prefix: str) -> Iterator[Path]:
    for attempt in range(64):
        width = 3 if attempt < 32 else 6  # 36**3 names; widen if the day is crowded
        yield directory / (prefix + "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(width)) + ".md")


def free_name(directory: Path, prefix: str) -> Path:
    """A `<prefix><xxx>.md` path no file has (callers hold the memory lock, so it stays free)."""
    for path in _candidates(directory, prefix):
        if not path.exists():
            return path
    raise FileExistsError(f"no free fragment name for {directory / prefix}*.md")


def create_unique(directory: Path, prefix: str, text: str) -> Path:
    """Create `<prefix><xxx>.md` with a short random suffix that no existing file has, durably."""
    for path in _candidates(directory, prefix):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as fh:
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
        fsync_dir(directory)
        return path
    raise FileExistsError(f"no free fragment name for {directory / prefix}*.md")
