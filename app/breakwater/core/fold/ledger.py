"""The pipeline's per-message ledger: what makes a request O(1) arithmetic, not a pass over the history.

Each sanitized message is entered once, when it arrives (again only if the sanitizer changes
it): its heuristic tokens as logged, what each far stage level makes of it and what it becomes in
working memory. The tokens of
any range at any level, how many messages each stage kind touches there and how many results
were truncated at the source are then a few lookups each.

Only messages a stage changes take room beyond their own count: a stage level is kept as the
sorted indices it changes and the running sum of what it saves, so a million short chat
messages cost a few bytes each (`array`, not lists of int objects). A level that changes any
message also keeps 4 bytes per message: how many it changes before each, so that a position in
its indices is a lookup, not a bisection.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Iterable, Iterator

NEAR = 4   # the form working memory gets from masking up (the head and tail of a long result)
LEVELS = (1, 2, 3, NEAR)
FAR_KINDS = ("snipped", "masked", "folded", "microcompacted")


class Ledger:
    __slots__ = ("tok0", "prefix", "changed", "saved", "kinds", "rank", "_ranks", "truncated", "group_starts")

    def __init__(self) -> None:
        self.tok0 = array("q")                 # heuristic tokens of message i as logged
        self.prefix = array("q", [0])          # prefix sums of tok0
        # by level (index 0 unused): indices whose far form differs, and prefix sums of what each saves
        self.changed = [array("q") for _ in range(NEAR + 1)]
        self.saved = [array("q", [0]) for _ in range(NEAR + 1)]
        # by level, for each kind it has made (in FAR_KINDS order): (kind, how many of changed[L][:j] are
        # of that kind, for every j)
        self.kinds: list[list[tuple[str, array]]] = [[] for _ in range(NEAR + 1)]
        # by level: rank[L][x] = how many of changed[L] are below x, for x up to len(tok0). A request asks
        # for a few dozen such positions: a lookup each, where bisecting the array makes an int object
        # per step. None while the level changes no message (a long chat of short messages: no room)
        self.rank: list[array | None] = [None] * (NEAR + 1)
        self._ranks: list[array] = []          # those not None, extended as each message is entered
        self.truncated = array("q")            # indices of tool results truncated at the source
        self.group_starts = array("q")         # indices of the messages that are not tool results

    def __len__(self) -> int:
        return len(self.tok0)

    def __eq__(self, other: object) -> bool:
        """The same messages entered with the same forms (however the positions were kept)."""
        return isinstance(other, Ledger) and all(
            getattr(self, a) == getattr(other, a) for a in ("tok0", "prefix", "changed", "saved", "truncated",
                                                             "group_starts")) \
            and all(self._kind_counts(L, k) == other._kind_counts(L, k) for L in LEVELS for k in range(len(FAR_KINDS)))

    def _kind_counts(self, level: int, k: int) -> array:
        for kind, arr in self.kinds[level]:
            if kind == FAR_KINDS[k]:
                return arr
        return array("i", bytes(4 * (len(self.changed[level]) + 1)))

    def copy(self) -> "Ledger":
        new = Ledger.__new__(Ledger)
        new.tok0, new.prefix, new.truncated = self.tok0[:], self.prefix[:], self.truncated[:]
        new.changed, new.saved = [a[:] for a in self.changed], [a[:] for a in self.saved]
        new.kinds = [[(kind, a[:]) for kind, a in arrs] for arrs in self.kinds]
        new.rank = [r[:] if r is not None else None for r in self.rank]
        new._ranks = [r for r in new.rank if r is not None]
        new.group_starts = self.group_starts[:]
        return new

    def truncate(self, d: int) -> None:
        """Forget messages d and later (the sanitizer changed them)."""
        if d >= len(self.tok0):
            return
        del self.tok0[d:]
        del self.prefix[d + 1:]
        for L in LEVELS:
            r = self.rank[L]
            if r is None:
                continue
            j = r[d]
            del self.changed[L][j:]
            del self.saved[L][j + 1:]
            for _, arr in self.kinds[L]:
                del arr[j + 1:]
            del r[d + 1:]
        for arr in (self.truncated, self.group_starts):
            del arr[bisect_left(arr, d):]

    def add(self, t0: int, group_start: bool, forms: Iterable[tuple[int, str, int]] = ()) -> None:
        """Enter the next message: its heuristic tokens as logged, and (level, kind, tokens) for each
        level that changes it, in level order."""
        i = len(self.tok0)
        if group_start:
            self.group_starts.append(i)
        self.tok0.append(t0)
        self.prefix.append(self.prefix[-1] + t0)
        for r in self._ranks:
            r.append(r[-1])
        for L, kind, tokens in forms:
            changed, cums = self.changed[L], self.kinds[L]
            for k, arr in cums:
                if k == kind:
                    break
            else:   # none of this kind before
                cums.append((kind, array("i", bytes(4 * (len(changed) + 1)))))
                cums.sort(key=lambda c: FAR_KINDS.index(c[0]))
            for k, arr in cums:
                arr.append(arr[-1] + (k == kind))
            changed.append(i)
            saved = self.saved[L]
            saved.append(saved[-1] + t0 - tokens)
            r = self.rank[L]
            if r is None:   # the level's first: none below any position up to i
                r = self.rank[L] = array("i", bytes(4 * (i + 2)))
                self._ranks.append(r)
            r[-1] += 1

    def add_truncated(self, i: int) -> None:
        self.truncated.append(i)

    def tokens(self, level: int, a: int, b: int) -> int:
        """Heuristic tokens of messages [a, b) with far stage `level` applied (or in working memory: NEAR)."""
        p = self.prefix
        r = self.rank[level]
        if r is None:   # level 0, or one that changes no message (yet): a long chat of short messages
            return p[b] - p[a]
        sv = self.saved[level]
        return p[b] - p[a] - sv[r[b]] + sv[r[a]]

    def changes(self, levels: Iterable[int], a: int, b: int) -> bool:
        """Whether any far stage level of `levels`, or the working-memory form, changes a message of [a, b)."""
        return any(self.level_changes(L, a, b) for L in levels) or self.level_changes(NEAR, a, b)

    def level_changes(self, level: int, a: int, b: int) -> bool:
        """Whether stage `level` (or NEAR) changes a message of [a, b); level 0 changes none."""
        r = self.rank[level]
        return r is not None and r[b] > r[a]

    def changed_in(self, l1: int, l2: int, a: int, b: int) -> Iterator[int]:
        """In order, the indices in [a, b) that level l1 or level l2 changes (level 0 changes none)."""
        r1, r2 = self.rank[l1], self.rank[l2]
        c1 = self.changed[l1][r1[a]:r1[b]] if r1 is not None else ()
        c2 = self.changed[l2][r2[a]:r2[b]] if r2 is not None else ()
        if not c1 or not c2:
            yield from c1 or c2
            return
        i = j = 0
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
        r = self.rank[level]
        if r is None:
            return
        ja, jb = r[a], r[b]
        if ja == jb:
            return
        for kind, arr in self.kinds[level]:
            c = arr[jb] - arr[ja]
            if c:
                counts[kind] = counts.get(kind, 0) + c

    def truncated_count(self, a: int, b: int) -> int:
        arr = self.truncated
        return bisect_left(arr, b) - bisect_left(arr, a) if arr else 0
