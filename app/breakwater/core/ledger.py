"""The pipeline's per-message ledger: what makes a request O(1) arithmetic, not a pass over the history.

Each sanitized message is entered once, when it arrives (again only if the sanitizer changes
it): its heuristic tokens as logged, what each far stage level makes of it and what it becomes in
working memory. The tokens of
any range at any level, how many messages each stage kind touches there and how many results
were truncated at the source are then a few lookups each.

Only messages a stage changes take room beyond their own count: a stage level is kept as the
sorted indices it changes and the running sum of what it saves, so a million short chat
messages cost a few bytes each (`array`, not lists of int objects).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Iterable, Iterator

NEAR = 4   # the form working memory gets from masking up (the head and tail of a long result)
LEVELS = (1, 2, 3, NEAR)
FAR_KINDS = ("snipped", "masked", "folded", "microcompacted")


class Ledger:
    __slots__ = ("tok0", "prefix", "changed", "saved", "kinds", "truncated", "group_starts")

    def __init__(self) -> None:
        self.tok0 = array("q")                 # heuristic tokens of message i as logged
        self.prefix = array("q", [0])          # prefix sums of tok0
        # by level (index 0 unused): indices whose far form differs, and prefix sums of what each saves
        self.changed = [array("q") for _ in range(NEAR + 1)]
        self.saved = [array("q", [0]) for _ in range(NEAR + 1)]
        self.kinds = {L: [array("q") for _ in FAR_KINDS] for L in LEVELS}  # indices, by level and kind
        self.truncated = array("q")            # indices of tool results truncated at the source
        self.group_starts = array("q")         # indices of the messages that are not tool results

    def __len__(self) -> int:
        return len(self.tok0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ledger) and all(getattr(self, a) == getattr(other, a) for a in self.__slots__)

    def copy(self) -> "Ledger":
        new = Ledger.__new__(Ledger)
        new.tok0, new.prefix, new.truncated = self.tok0[:], self.prefix[:], self.truncated[:]
        new.changed, new.saved = [a[:] for a in self.changed], [a[:] for a in self.saved]
        new.kinds = {L: [a[:] for a in arrs] for L, arrs in self.kinds.items()}
        new.group_starts = self.group_starts[:]
        return new

    def truncate(self, d: int) -> None:
        """Forget messages d and later (the sanitizer changed them)."""
        if d >= len(self.tok0):
            return
        del self.tok0[d:]
        del self.prefix[d + 1:]
        for L in LEVELS:
            j = bisect_left(self.changed[L], d)
            del self.changed[L][j:]
            del self.saved[L][j + 1:]
        for arr in (*(a for arrs in self.kinds.values() for a in arrs), self.truncated, self.group_starts):
            del arr[bisect_left(arr, d):]

    def add(self, t0: int, group_start: bool) -> None:
        """Enter the next message, its heuristic tokens as logged; then what changes it, if anything."""
        if group_start:
            self.group_starts.append(len(self.tok0))
        self.tok0.append(t0)
        self.prefix.append(self.prefix[-1] + t0)

    def add_forms(self, i: int, t0: int, forms) -> None:
        """Message i (the last entered): (level, kind, tokens) for each level that changes it."""
        for L, kind, tokens in forms:
            self.changed[L].append(i)
            saved = self.saved[L]
            saved.append(saved[-1] + t0 - tokens)
            self.kinds[L][FAR_KINDS.index(kind)].append(i)

    def add_truncated(self, i: int) -> None:
        self.truncated.append(i)

    def tokens(self, level: int, a: int, b: int) -> int:
        """Heuristic tokens of messages [a, b) with far stage `level` applied (or in working memory: NEAR)."""
        p = self.prefix
        if not level:
            return p[b] - p[a]
        ch = self.changed[level]
        if not ch:   # the level changes no message (yet): a long chat of short messages
            return p[b] - p[a]
        sv = self.saved[level]
        return p[b] - p[a] - sv[bisect_left(ch, b)] + sv[bisect_left(ch, a)]

    def changes(self, levels: Iterable[int], a: int, b: int) -> bool:
        """Whether any far stage level of `levels`, or the working-memory form, changes a message of [a, b)."""
        changed = self.changed
        for L in levels:
            ch = changed[L]
            if ch and bisect_left(ch, b) > bisect_left(ch, a):
                return True
        ch = changed[NEAR]
        return bool(ch) and bisect_left(ch, b) > bisect_left(ch, a)

    def changed_in(self, l1: int, l2: int, a: int, b: int) -> Iterator[int]:
        """In order, the indices in [a, b) that level l1 or level l2 changes (level 0 changes none)."""
        c1 = self.changed[l1] if l1 else ()
        c2 = self.changed[l2] if l2 else ()
        if not c1 and not c2:
            return
        i, j = bisect_left(c1, a), bisect_left(c2, a)
        while True:
            x = c1[i] if i < len(c1) else b
            y = c2[j] if j < len(c2) else b
            k = min(x, y)
            if k >= b:
                return
            yield k
            i += x == k
            j += y == k

    def count_kinds(self, level: int, a: int, b: int, counts: dict[str, int]) -> None:
        """Add to `counts` how many messages of [a, b) level `level` changes, by kind (in FAR_KINDS order)."""
        if not self.changed[level]:   # a kind's indices are some of these (a long chat: none)
            return
        for kind, arr in zip(FAR_KINDS, self.kinds[level]):
            if arr:
                c = bisect_left(arr, b) - bisect_left(arr, a)
                if c:
                    counts[kind] = counts.get(kind, 0) + c

    def truncated_count(self, a: int, b: int) -> int:
        arr = self.truncated
        return bisect_left(arr, b) - bisect_left(arr, a) if arr else 0
