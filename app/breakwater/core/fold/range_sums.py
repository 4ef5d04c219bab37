"""Sums of a per-message count over ranges of the sanitized list, each message counted once.

The index sums tiktoken's count (and its lower bound) of the messages of a request at a stage level
only where a request asks for it: near a limit, never over a history far past the window. A plan asks
for several ranges at one level (the far history from its start, working memory's last messages), so
one run of prefix sums that started again wherever a range began outside it counted the same messages
over and over: at 20,000 messages each was counted ~7 times, and more the longer the session. Here
every range asked for is kept, as prefix sums over disjoint spans that are joined when they meet, so
a message is counted once at each level until it changes (`truncate`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from typing import Callable


class RangeSums:
    __slots__ = ("_bases", "_spans")

    def __init__(self) -> None:
        self._bases: list[int] = []        # the first index of each span, ascending
        # for each span, prefix sums of its counts: 8 bytes a message (a list of int objects took 36).
        # Only differences within a span are read, so a span's sums may start anywhere.
        self._spans: list[array] = []

    def copy(self) -> RangeSums:
        new = RangeSums()
        new._bases = self._bases[:]
        new._spans = [arr[:] for arr in self._spans]
        return new

    def __eq__(self, other: object) -> bool:
        """The same sums over the same spans (a snapshot's copy equals what it copied)."""
        return isinstance(other, RangeSums) and self._bases == other._bases and self._spans == other._spans

    __hash__ = None   # a mutable value

    def __len__(self) -> int:
        """How many messages are counted (for tests and benchmarks)."""
        return sum(len(arr) - 1 for arr in self._spans)

    def known(self, a: int, b: int) -> int | None:
        """The sum over [a, b) (a < b) if every message of it is counted already, else None: a plan asks
        again and again for ranges it has asked for, which this answers without a count to call."""
        bases = self._bases
        k = bisect_right(bases, a) - 1
        if k < 0:
            return None
        base, arr = bases[k], self._spans[k]
        if b - base >= len(arr):
            return None
        return arr[b - base] - arr[a - base]

    def total(self, a: int, b: int, count: Callable[[int], int]) -> int:
        """The sum of `count(i)` for i in [a, b), calling `count` only for messages not counted yet."""
        if a >= b:
            return 0
        bases, spans = self._bases, self._spans
        k = bisect_right(bases, a) - 1
        if k < 0 or bases[k] + len(spans[k]) - 1 < a:   # a is in no span, nor at the end of one: a new one
            k += 1
            bases.insert(k, a)
            spans.insert(k, array("q", [0]))
        base, arr = bases[k], spans[k]
        while base + len(arr) - 1 < b:
            end = base + len(arr) - 1
            if k + 1 < len(bases) and bases[k + 1] == end:   # the next span starts here: one span
                arr = self._join(k)
                continue
            stop = min(b, bases[k + 1]) if k + 1 < len(bases) else b
            last, append = arr[-1], arr.append
            for i in range(end, stop):
                last += count(i)
                append(last)
        return arr[b - base] - arr[a - base]

    def _join(self, k: int) -> array:
        """Join span k and the next, adjacent one, shifting the shorter one's sums (so that joining
        spans as they grow costs O(n log n) in all)."""
        left, right = self._spans[k], self._spans[k + 1]
        if len(left) <= len(right):
            shift = right[0] - left[-1]
            joined = array("q", [v + shift for v in left[:-1]]) + right
        else:
            shift = left[-1] - right[0]
            joined = left + array("q", [v + shift for v in right[1:]])
        self._spans[k] = joined
        del self._bases[k + 1], self._spans[k + 1]
        return joined

    def truncate(self, d: int) -> None:
        """Forget the counts of messages d and later (they changed)."""
        bases, spans = self._bases, self._spans
        k = bisect_right(bases, d - 1)   # spans starting before d are kept, cut at d
        del bases[k:], spans[k:]
        if spans:
            del spans[-1][d - bases[-1] + 1:]
