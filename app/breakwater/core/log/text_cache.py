"""Values worked out from long texts (tool results of tens of kilobytes), found again by the text's
identity rather than its contents.

Hashing such a text costs about what working the value out does (a first simulation hashes every
long result of the session once: ~0.02 s for the 31 MB bench session), and the askers hold the same
string objects whenever they ask again (a re-simulation, another preset, a replay's checkpoints).
"""

from __future__ import annotations

import functools
from typing import Any, Callable


# how to empty each cache of values found by the identity of a text or a message (`forget_all`)
_CLEARS: list[Callable[[], None]] = []


def forgets(clear: Callable[[], None]) -> Callable[[], None]:
    """Register `clear` (emptying a cache keyed by identity) with `forget_all`."""
    _CLEARS.append(clear)
    return clear


def forget_all() -> None:
    """Empty every cache keyed by the identity of a text or a message. An entry holds its text, so
    these caches (bounded in entries, not bytes: up to 65,536 texts each) kept a process's earlier
    sessions alive after it moved on (eval of 43 sessions in one process: peak 126 MB, where the
    largest alone takes 62 MB). A process that lets a session go and reads another calls this."""
    for clear in _CLEARS:
        clear()


class TextCache:
    """Up to `size` values by text; when full it starts again empty, as the pipeline's form cache does:
    emptying is one call, where dropping the oldest entry walks them, which another thread adding one
    would break (the workbench re-simulates in a worker). An entry holds its text, so no other string
    takes its id while it is there."""

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int):
        self._entries: dict[int, tuple[str, Any]] = {}
        self._size = size
        forgets(self._entries.clear)   # the dict is emptied in place, never replaced

    def get(self, text: str) -> Any:
        hit = self._entries.get(id(text))
        return hit[1] if hit is not None and hit[0] is text else None

    def put(self, text: str, value: Any) -> None:
        entries = self._entries
        if len(entries) >= self._size:
            entries.clear()
        entries[id(text)] = (text, value)


def text_cached(size: int) -> Callable[[Callable[[str], Any]], Callable[[str], Any]]:
    """`fn(text)` worked out once per text object, for the last `size` texts asked of."""
    def decorate(fn: Callable[[str], Any]) -> Callable[[str], Any]:
        cache = TextCache(size)
        get, put = cache.get, cache.put

        @functools.wraps(fn)
        def cached(text: str) -> Any:
            value = get(text)
            if value is None:
                value = fn(text)
                put(text, value)
            return value
        return cached
    return decorate
