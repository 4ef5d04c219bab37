"""The soft-zone search (SPEC §4, stages 4 and 6): the lowest stage level, applied oldest first only
as far as needed, that brings the request under the soft limit, then shape history when even that
is over the hard limit; and the counts of the request shapes it tries.

`SoftZone` is a part of `Pipeline` (core/fold/pipeline.py).
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import dataclass

from breakwater.core.log.message import Message
from breakwater.core.log.tokens import heuristic_message, lower_message

# tokens <= UTF-8 bytes (a token is at least one byte), and a text's bytes are at most this many times
# its heuristic count (ASCII: 4 per token counted; 4-byte characters: 2 per token counted, 8 bytes)
BYTES_PER_HEURISTIC_TOKEN = 8


@dataclass(slots=True)   # not frozen: a plan builds several, and frozen fields are set the slow way
class _Shape:
    """One candidate request: the head, the region sent and the stage level of each part."""

    head: list[Message]
    cut: int
    start: int
    drop_to: int
    level: int
    lower: int
    boundary: int
    near_start: int
    sent: int
    counted: str
    kept_fu: int | None
    joined: tuple[str, ...]
    heuristic: int
    head_heuristic: int



class SoftZone:
    def _fit(self, n: int, level: int, fast: bool, first: tuple | None = None) -> "_Shape":
        """Soft zone then shape history: the cheapest request from the current cut that fits.
        `first`: `_frame` of the cut and `_measure` of the whole request at `level` from it, when the
        caller has them."""
        p = self.policy
        cut = self._cut()
        framed = self._frame(cut, n) if first is None else first[0]
        shapes: dict[tuple, _Shape] = {}   # the search below asks for some shapes twice

        def at(lv: int, s: int, lower: int | None = None, boundary: int | None = None, measured=None) -> _Shape:
            key = (lv, s, lower, boundary)
            shape = shapes.get(key)
            if shape is not None:
                return shape
            jh, js, joined, kept_fu, head_h = framed if s == cut else self._frame(s, n)
            ns = self._near_start(lv, js, n)
            if boundary is not None:
                boundary = max(js, min(boundary, ns))
            t, how, h = measured or self._measure(jh, lv, js, ns, n, lower, boundary, head_h)
            partial = boundary is not None and lower is not None and boundary < ns
            shape = shapes[key] = _Shape(jh, cut, js, s, lv, lower if partial else lv, boundary if partial else ns,
                                         ns, t, how, kept_fu, joined, h, head_h)
            return shape

        soft = self._soft_limit
        shape = at(level, cut, None, None, first and first[1])
        if shape.sent > soft and (not fast or level):
            higher = [lv for lv in self._stage_levels if lv > level]
            if higher and not self.ledger.changes(higher, shape.start, n):
                # no stage above `level` changes a message sent (a long chat of short messages): each
                # sends this same request, over the soft limit, so the search below would end at the highest
                shape = at(higher[-1], cut)
            else:
                below = level
                for lv in higher:
                    whole = at(lv, cut)
                    if whole.sent <= soft:
                        shape = self._oldest_first(at, lv, below, cut, n, whole)
                        break
                    shape, below = whole, lv

        if shape.sent > self._hard_limit:
            # 6. shape history: the request must fit; keep [System][First user][Summary][Last N turns]
            gs = self.ledger.group_starts
            cands = gs[bisect.bisect_right(gs, cut):bisect.bisect_left(gs, n)]
            for keep in range(p.shape_keep_last_max, p.shape_keep_last_min - 1, -1):
                if keep > len(cands):
                    continue
                shape = at(shape.level, cands[-keep])
                if shape.sent <= self._hard_limit:
                    break
        return shape

    def _oldest_first(self, at, lv: int, below: int, cut: int, n: int, whole: "_Shape") -> "_Shape":
        """Apply stage `lv` from the oldest message on, only as far as needed to get under the soft limit.

        The boundary overshoots by a small hysteresis and then stays where it is while the request
        still fits, so the compacted prefix does not change every turn (prompt caching)."""
        p = self.policy
        lo, hi = whole.start, whole.near_start
        key = (cut, lv, below)
        kept = self._soft_boundary.get(key)
        if kept is not None and lo <= kept <= hi:
            shape = at(lv, cut, below, kept)
            if shape.sent <= self._soft_limit:
                return shape
        last = at(lv, cut, below, hi).sent
        if last > self._soft_limit:
            return whole  # even every far message is not enough: the stage applies to working memory too
        goal = self._soft_limit - int(p.soft_hysteresis_ratio * self._soft_limit)
        if last > goal:
            goal = self._soft_limit
        sent = self._boundary_count(at, lv, below, cut, n, whole)
        while lo < hi:
            mid = (lo + hi) // 2
            if sent(mid) <= goal:
                hi = mid
            else:
                lo = mid + 1
        self._soft_boundary = {key: lo}
        return at(lv, cut, below, lo)

    def _boundary_count(self, at, lv: int, below: int, cut: int, n: int, whole: "_Shape"):
        """`at(lv, cut, below, b).sent` for a boundary b in [whole.start, whole.near_start): by heuristic
        counts without building a shape per boundary tried, as only the two far parts move with it."""
        if self.mode == "exact":
            return lambda b: at(lv, cut, below, b).sent
        tokens, apply = self.ledger.tokens, self.calibration.apply
        js, ns = whole.start, whole.near_start
        rest = whole.head_heuristic + (tokens(self._near_level(below), ns, n) if ns < n else 0)
        return lambda b: apply(rest + tokens(lv, js, b) + tokens(below, b, ns))

    # -- counting ---------------------------------------------------------------------------------
    def _exact_sum(self, level: int, a: int, b: int) -> int:
        return self._summed(self._exact, self.counter.exact_message, level, a, b)

    def _lower_sum(self, level: int, a: int, b: int) -> int:
        return self._summed(self._lower, lower_message, level, a, b)

    def _summed(self, sums: dict, count, level: int, a: int, b: int) -> int:
        """`count` of messages [a, b) at far stage `level`, from prefix sums kept in `sums` by level."""
        if a >= b:
            return 0
        base, arr = sums.get(level, (a, None))
        if arr is None or not base <= a < base + len(arr):   # not from the messages summed: start again at a
            base, arr = a, array("q", [0])   # 8 bytes a message, where a list of int objects took 36
        sums[level] = (base, arr)
        out = self.san.out
        while base + len(arr) - 1 < b:
            i = base + len(arr) - 1
            res = self._transform(i, level, near=False)
            arr.append(arr[-1] + count(res[0] if res else out[i].message))
        return arr[b - base] - arr[a - base]

    def _in_band(self, heuristic: int) -> bool:
        """Whether tiktoken counts a request of `heuristic` plain tokens: whenever the verdict (the zone,
        `fits`) could change. The heuristic undercounts some text up to ~8× (hex ~2.3×, base64 ~2.7×,
        emoji ~5×, rare CJK ~7.7×) and overcounts other text (runs of spaces), so it decides alone only
        when even its bound on tokens, the request's UTF-8 bytes, stays under `precise_from`."""
        return self.mode == "exact" and \
            BYTES_PER_HEURISTIC_TOKEN * heuristic + self.calibration.overhead >= self.policy.precise_from

    def _past_limits(self, estimate: int, lower: int) -> bool:
        """Whether a request estimated at `estimate` and of at least `lower` visible tokens (core/log/tokens.py
        `lower_message`) is counted as an estimate: when both are past the window. It is then past every
        limit a verdict or the soft-zone search compares it with, and tiktoken's count would change none
        of them (a history far past the hard limit, tens of MB on a long session, was encoded only to find
        it so). The estimate past the window too: the bound, ~0.3 of the count, is worked out only for
        a request likely to be past it by that much, never for one near the limits."""
        return estimate > self.policy.window and lower + self.calibration.overhead > self.policy.window

    _maybe_past = _past_limits   # with an upper bound on `lower`: whether working it out may tell

    def _bounded(self, estimate: int, lower: int) -> int:
        """The figure of a request `_past_limits` decided: the estimate, raised to the bound where the
        heuristic undercounts, so that it is past every limit as the request is."""
        return max(estimate, lower + self.calibration.overhead)

    def _measure(self, head: list[Message], level: int, start: int, near_start: int, n: int,
                 lower: int | None = None, boundary: int | None = None,
                 head_tokens: int | None = None) -> tuple[int, str, int]:
        """Tokens of head + out[start:n]: far messages before `boundary` at `level`, the rest of the far
        ones at `lower`; working memory (from near_start) at `level` when the stage is whole, else `lower`.
        Returns the count, whether it is exact, and the plain heuristic figure."""
        tokens = self.ledger.tokens
        h = sum(heuristic_message(m) for m in head) if head_tokens is None else head_tokens
        # an empty part costs two bisections for nothing, and a request of a plan has one or two
        if boundary is not None and lower is not None and boundary < near_start:
            far = tokens(level, start, boundary) + tokens(lower, boundary, near_start)
            near_level = lower
        else:
            far = tokens(level, start, near_start)
            lower, boundary, near_level = level, near_start, level
        h += far
        if near_start < n:
            h += tokens(self._near_level(near_level), near_start, n)
        est = self.calibration.apply(h)
        if not self._in_band(h):   # a few lookups: cheaper than remembering them
            return est, "estimate", h
        # one plan asks for the same request shape several times (zone, stages, shaping): counted once each
        key = (id(head), level, start, near_start, n, lower, boundary)
        hit = self._measured.get(key)
        if hit is not None:
            return hit[0]
        out, near = self.san.out, []
        for i in range(near_start, n):
            r = self._near_cached(i, near_level)[0]
            near.append(r[0] if r else out[i].message)
        lo = 0
        if self._maybe_past(est, 2 * h):   # a message's bound is at most twice its heuristic count
            lo = self._lower_sum(level, start, boundary) + self._lower_sum(lower, boundary, near_start)
            if self._maybe_past(est, lo + 2 * (h - far)):   # the rest's only when it may tell
                lo += sum(lower_message(m) for m in head) + sum(lower_message(m) for m in near)
        if self._past_limits(est, lo):
            result = self._bounded(est, lo), "estimate", h
        else:
            c = self.counter
            x = sum(c.exact_message(m) for m in head) + sum(c.exact_message(m) for m in near)
            x += self._exact_sum(level, start, boundary) + self._exact_sum(lower, boundary, near_start)
            result = x + self.calibration.overhead, "exact", h   # visible + unseen, as `apply` counts
        self._measured[key] = (result, head)   # the head is kept so its id stays unique for the plan
        return result
