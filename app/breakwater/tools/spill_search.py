"""Finding text in a spill file of any size, a chunk at a time (SPEC §10 spill pane).

Matching is on bytes (the file may not be valid UTF-8) with `bytes.find`/`rfind`, so a
gigabyte is searched at memory speed and cancellation is checked between chunks. Case is
smart: a query without capitals ignores ASCII case; non-ASCII letters always match exactly.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from breakwater.tools.spill_index import NEVER_CANCELLED

SEARCH_CHUNK = 8 << 20


@dataclass(frozen=True)
class Query:
    text: str
    needle: bytes
    fold: bool

    @classmethod
    def parse(cls, text: str) -> Query | None:
        """The query for what the user typed; None for nothing to look for."""
        if not text:
            return None
        fold = text == text.lower()
        needle = text.encode("utf-8", "surrogateescape")
        return cls(text, needle.lower() if fold else needle, fold)


@dataclass(frozen=True)
class Hit:
    offset: int
    length: int


def _window(fd: int, query: Query, lo: int, hi: int) -> bytes:
    data = os.pread(fd, max(hi - lo, 0), lo)
    return data.lower() if query.fold else data


def find_forward(fd: int, query: Query, start: int, stop: int, *, chunk: int = SEARCH_CHUNK,
                 cancelled: Callable[[], bool] = NEVER_CANCELLED) -> Hit | None:
    """The first hit lying wholly in bytes [start, stop)."""
    overlap = len(query.needle) - 1
    pos = start
    while pos < stop and not cancelled():
        hi = min(stop, pos + chunk + overlap)
        window = _window(fd, query, pos, hi)
        i = window.find(query.needle)
        if i != -1:
            return Hit(pos + i, len(query.needle))
        if pos + len(window) < hi:  # the file ended early
            return None
        pos += chunk
    return None


def find_backward(fd: int, query: Query, start: int, before: int, stop: int, *,
                  chunk: int = SEARCH_CHUNK, cancelled: Callable[[], bool] = NEVER_CANCELLED) -> Hit | None:
    """The last hit starting in [start, before) and lying wholly in [start, stop)."""
    overlap = len(query.needle) - 1
    hi = before
    while hi > start and not cancelled():
        lo = max(start, hi - chunk)
        i = _window(fd, query, lo, min(stop, hi + overlap)).rfind(query.needle)
        if i != -1:
            return Hit(lo + i, len(query.needle))
        hi = lo
    return None


def search(fd: int, query: Query, start: int, stop: int, at: int, *, backward: bool = False,
           cancelled: Callable[[], bool] = NEVER_CANCELLED) -> tuple[Hit | None, bool]:
    """The next hit after offset `at` (or the previous one before it) in [start, stop),
    wrapping round the end once; returns the hit and whether it wrapped."""
    at = min(max(at, start), stop)
    if backward:
        hit = find_backward(fd, query, start, at, stop, cancelled=cancelled)
        if hit is None and not cancelled():
            hit = find_backward(fd, query, at, stop, stop, cancelled=cancelled)
            return hit, hit is not None
        return hit, False
    hit = find_forward(fd, query, at, stop, cancelled=cancelled)
    if hit is None and not cancelled():
        hit = find_forward(fd, query, start, min(stop, at + len(query.needle) - 1), cancelled=cancelled)
        return hit, hit is not None
    return hit, False
