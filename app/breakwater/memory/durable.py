"""Fresh fragment names in a memory directory; the writes themselves are `OwnedDir`'s (fsynced,
no symlink followed)."""

from __future__ import annotations

import secrets
from typing import Iterator

from breakwater.core.log.beneath import OwnedDir

_SUFFIX_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def _candidates(prefix: str) -> Iterator[str]:
    for attempt in range(64):
        width = 3 if attempt < 32 else 6  # 36**3 names; widen if the day is crowded
        yield prefix + "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(width)) + ".md"


def free_name(directory: OwnedDir, prefix: str) -> str:
    """A `<prefix><xxx>.md` name no file has (callers hold the memory lock, so it stays free)."""
    for name in _candidates(prefix):
        if not directory.exists(name):
            return name
    raise FileExistsError(f"no free fragment name for {directory.path / prefix}*.md")


def create_unique(directory: OwnedDir, prefix: str, text: str) -> str:
    """Create `<prefix><xxx>.md` with a short random suffix that no existing file has, durably."""
    for name in _candidates(prefix):
        try:
            directory.create(name, text.encode("utf-8"))
        except FileExistsError:
            continue
        return name
    raise FileExistsError(f"no free fragment name for {directory.path / prefix}*.md")
