"""Values worked out from long texts (tool results of tens of kilobytes), found again by the text's
identity rather than its contents.

Hashing such a text costs about what working the value out does (a first simulation hashes every
long result of the session once: ~0.02 s for the 31 MB bench session), and the askers hold the same
string objects whenever they ask again (a re-simulation, another preset, a replay's checkpoints).
"""

from __future__ import annotations

import functools
from typing import Any, Callable


class TextCache:
    """Up to `size` values by text; the oldest goes first. An entry holds its text, so no other string
    takes its id while it is there. Entries are replaced whole, never changed: threads may share it."""

    __slots__ = ("_entries", "_size")

    def __init__(self, size: int):
        self._entries: dict[int, tuple[str, Any]] = {}
        self._size = size

    def get(self, text: str) -> Any:
        hit = self._entries.get(id(text))
        return hit[1] if hit is not None and hit[0] is text else None

    def put(self, text: str, value: Any) -> None:
        entries = self._entries
        if len(entries) >= self._size and id(text) not in entries:
            entries.pop(next(iter(entries)), None)   # a session's results come in order: the oldest
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
