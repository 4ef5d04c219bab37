"""The soft-zone search (SPEC §4, stages 4 and 6): the lowest stage level, applied oldest first only
as far as needed, that brings the request under the soft limit, then shape history when even that
is over the hard limit.

`SoftZone` keeps where the search ended for each cut and stage level (the boundary kept: the
compacted prefix stays put while the request fits, for the prompt cache); it frames requests with
`Frames` and counts them with the meter.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from breakwater.core.fold.frames import Frames
from breakwater.core.fold.index import Index
from breakwater.core.fold.meter import Meter
from breakwater.core.fold.stage_forms import near_level, stage_levels
from breakwater.core.log.message import Message
from breakwater.core.policy import Policy


@dataclass(slots=True)   # not frozen: a plan builds several, and frozen fields are set the slow way
class Shape:
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
    def __init__(self, policy: Policy, index: Index, meter: Meter, frames: Frames):
        self.index, self.meter, self.frames = index, meter, frames
        self._soft_boundary: dict[tuple[int, int, int], int] = {}  # (cut, level, lower) -> boundary kept
        self.retune(policy)

    def copy(self, index: Index, meter: Meter, frames: Frames) -> SoftZone:
        new = SoftZone.__new__(SoftZone)
        new.__dict__.update(vars(self), index=index, meter=meter, frames=frames,
                            _soft_boundary=self._soft_boundary.copy())
        return new

    def retune(self, policy: Policy) -> None:
        self.policy = policy
        self._soft_limit, self._hard_limit = policy.soft_limit, policy.hard_limit
        self._stage_levels = stage_levels(policy)
        self._soft_boundary.clear()   # searched against the old limits

    def kept(self, cut: int, level: int, below: int) -> int | None:
        """The boundary the search last ended at for stage `level` over `below` from `cut`, if any."""
        return self._soft_boundary.get((cut, level, below))

    def kept_boundaries(self) -> dict[tuple[int, int, int], int]:
        """Every boundary kept, by (cut, level, the level below it)."""
        return dict(self._soft_boundary)

    def fit(self, cut: int, n: int, level: int, fast: bool, first: tuple | None = None) -> Shape:
        """Soft zone then shape history: the cheapest request from `cut` that fits, no stage below `level`.
        `first`: the frame of the cut and the measure of the whole request at `level` from it, when the
        caller has them."""
        p = self.policy
        at = self._shaper(cut, n, self.frames.frame(cut, n) if first is None else first[0])
        soft = self._soft_limit
        shape = at(level, cut, None, None, first and first[1])
        if shape.sent > soft and (not fast or level):
            higher = [lv for lv in self._stage_levels if lv > level]
            if higher and not self.index.ledger.changes(higher, shape.start, n):
                # no stage above `level` changes a message sent (a long chat of short messages): each
                # sends this same request, over the soft limit, so the search below would end at the highest
                shape = at(higher[-1], cut)
            else:
                below = level
                for lv in higher:
                    whole = at(lv, cut)
                    if lv == 2 and p.clear_at_least_tokens and shape.sent - whole.sent < p.clear_at_least_tokens:
                        continue   # masking all it may frees less than is worth a cache re-write: not done
                    if whole.sent <= soft:
                        # every far observation at once (mask_all: Anthropic's clear_tool_uses), or
                        # oldest first only as far as needed
                        shape = self._batched(at, lv, below, cut, whole) if lv == 2 and p.mask_all \
                            else self._oldest_first(at, lv, below, cut, n, whole)
                        break
                    shape, below = self._batched(at, lv, below, cut, whole) if lv == 2 else whole, lv

        if shape.sent > self._hard_limit:
            # 6. shape history: the request must fit; keep [System][First user][Summary][Last N turns]
            gs = self.index.ledger.group_starts
            cands = gs[bisect.bisect_right(gs, cut):bisect.bisect_left(gs, n)]
            for keep in range(p.shape_keep_last_max, p.shape_keep_last_min - 1, -1):
                if keep > len(cands):
                    continue
                shape = at(shape.level, cands[-keep])
                if shape.sent <= self._hard_limit:
                    break
        return shape

    def _shaper(self, cut: int, n: int, framed: tuple):
        """`at(level, start, lower, boundary)`: the request from `cut` (history from `start`) with stage
        `level` on the far messages, before `boundary` only and `lower` after it when both are given."""
        frame, measure, near_start = self.frames.frame, self.meter.measure, self.index.near_start
        shapes: dict[tuple, Shape] = {}   # the search asks for some shapes twice

        def at(lv: int, s: int, lower: int | None = None, boundary: int | None = None, measured=None) -> Shape:
            key = (lv, s, lower, boundary)
            shape = shapes.get(key)
            if shape is not None:
                return shape
            jh, js, joined, kept_fu, head_h = framed if s == cut else frame(s, n)
            ns = near_start(lv, js, n)
            if boundary is not None:
                boundary = max(js, min(boundary, ns))
            t, how, h = measured or measure(jh, lv, js, ns, n, lower, boundary, head_h)
            partial = boundary is not None and lower is not None and boundary < ns
            shape = shapes[key] = Shape(jh, cut, js, s, lv, lower if partial else lv, boundary if partial else ns,
                                         ns, t, how, kept_fu, joined, h, head_h)
            return shape
        return at

    def held(self, prev, n: int) -> Shape:
        """The request of `n` messages keeping the compaction of the previous request `prev` (a plan from the
        same cut): its stage level before its boundary, the level below after it. Messages that have
        left working memory since take their far form, as they do in every request."""
        at = self._shaper(prev.cut, n, self.frames.frame(prev.cut, n))
        if prev.boundary < prev.near_start and prev.lower != prev.level:
            return at(prev.level, prev.cut, prev.lower, prev.boundary)
        return at(prev.level, prev.cut)

    def restore(self, kept: dict[tuple[int, int, int], int]) -> None:
        """Keep the boundaries `kept_boundaries` gave: the request keeps the previous compaction."""
        self._soft_boundary = dict(kept)

    def _batched(self, at, lv: int, below: int, cut: int, whole: Shape) -> Shape:
        """`whole` (stage `lv` on everything before working memory), or with `mask_batch_tokens` the
        boundary kept where it was until moving it frees that many tokens: each move re-writes the
        provider's cached prefix from the first message it changes, so it is made in batches that pay
        for it rather than on every request (issue 41)."""
        batch = self.policy.mask_batch_tokens
        if not batch:
            return whole
        key = (cut, lv, below)
        kept = self._soft_boundary.get(key)
        if kept is not None and whole.start <= kept < whole.near_start:
            held = at(lv, cut, below, kept)
            if held.sent - whole.sent < batch and held.sent <= self._hard_limit:
                return held
        self._soft_boundary = {key: whole.near_start}
        return whole

    def _oldest_first(self, at, lv: int, below: int, cut: int, n: int, whole: Shape) -> Shape:
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
        sent = self.boundary_count(at, lv, below, cut, n, whole)
        while lo < hi:
            mid = (lo + hi) // 2
            if sent(mid) <= goal:
                hi = mid
            else:
                lo = mid + 1
        self._soft_boundary = {key: lo}
        return at(lv, cut, below, lo)

    def boundary_count(self, at, lv: int, below: int, cut: int, n: int, whole: Shape):
        """`at(lv, cut, below, b).sent` for a boundary b in [whole.start, whole.near_start): by heuristic
        counts without building a shape per boundary tried, as only the two far parts move with it."""
        if self.meter.mode == "exact":
            return lambda b: at(lv, cut, below, b).sent
        tokens, apply = self.index.ledger.tokens, self.meter.calibration.apply
        js, ns = whole.start, whole.near_start
        rest = whole.head_heuristic + (tokens(near_level(below), ns, n) if ns < n else 0)
        return lambda b: apply(rest + tokens(lv, js, b) + tokens(below, b, ns))
