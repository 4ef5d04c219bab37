"""Writing an export: all of it or nothing, never through a link planted where it goes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SUFFIXES = {".html": "html", ".htm": "html", ".md": "md", ".markdown": "md"}


def unwritable(path: Path) -> str | None:
    """Why `path` cannot take an export, in a few words; None when it can."""
    if path.is_dir():
        return "is a folder; name the file to write"
    if not path.parent.is_dir():
        return f"the folder {path.parent} does not exist"
    return None


def kind_of(path: Path) -> str | None:
    """"html" or "md" by the name's ending; None for another."""
    return SUFFIXES.get(path.suffix.lower())


def write_atomically(path: Path, text: str) -> None:
    """`text` at `path`: a temporary file beside it, then renamed over it (a link planted at `path` is
    replaced, never followed); with the permissions of a file the user makes (mkstemp's are private)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
