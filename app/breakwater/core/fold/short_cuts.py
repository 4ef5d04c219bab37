"""The plans of a request made in a few lookups of the index's sums, where the general path
(`Pipeline.plan`: the soft zone's search, a deep compaction, shaping) would decide the same by
building and counting a request shape per step (issue 7 item 18, issue 8 item 9): with nothing
pending, a request under the soft limit, or over it where no stage changes a message sent, or where
the soft zone's search would end where it ended before (most requests of a long agent session send
the history from the same cut, at the same stage level, up to the same kept boundary).

`ShortCuts` keeps nothing of its own: it reads the index, the meter, the soft zone's kept
boundaries and the cache-stable prefix. Each method returns the plan, or None when the general
path must decide. `stamp`: (turn, raw tokens, API tokens) of the request, as the plan carries them.
"""

from __future__ import annotations

from breakwater.core.fold.compactions import DeepCompaction
from breakwater.core.fold.index import Index
from breakwater.core.fold.ledger import NEAR
from breakwater.core.fold.meter import Meter
from breakwater.core.fold.plan import Plan
from breakwater.core.fold.soft_zone import SoftZone
from breakwater.core.fold.stable_prefix import CachePrefix, counted_as_sent
from breakwater.core.fold.stage_forms import stage_levels
from breakwater.core.policy import Policy


class ShortCuts:
    def __init__(self, policy: Policy, index: Index, meter: Meter, soft_zone: SoftZone, deep: DeepCompaction,
                 prefix: CachePrefix):
        self.index, self.meter, self.soft_zone, self.deep, self.prefix = index, meter, soft_zone, deep, prefix
        # soft-zone steps are weighed against the cache they break (core/fold/pipeline.py `_cache_gate`): the
        # request over the soft limit is then the general path's to plan (it keeps the previous request's
        # compaction where the search would move a boundary, which the kept boundaries do not say)
        self.gated = False
        self.retune(policy)

    def copy(self, index: Index, meter: Meter, soft_zone: SoftZone, deep: DeepCompaction,
             prefix: CachePrefix) -> ShortCuts:
        new = ShortCuts.__new__(ShortCuts)
        new.__dict__.update(vars(self), index=index, meter=meter, soft_zone=soft_zone, deep=deep, prefix=prefix)
        return new

    def retune(self, policy: Policy) -> None:
        self.policy = policy
        self._soft_limit, self._hard_limit = policy.soft_limit, policy.hard_limit
        self._stage_levels = stage_levels(policy)

    def plan(self, n: int, cut: int, framed: tuple, base: int, plain: int, stamp: tuple,
             counted: str = "estimate") -> Plan | None:
        """The plan of request `n` with nothing pending, from `cut` (`framed`: its frame; `base` and
        `plain`: the request at no stage as counted, see `under_soft`, and by the plain heuristic)."""
        return self.under_soft(n, cut, framed, base, plain, stamp, counted) \
            or self.from_kept_boundary(n, cut, framed, base, plain, stamp, counted)

    def under_soft(self, n: int, cut: int, framed: tuple, est: int, h: int, stamp: tuple,
                   counted: str = "estimate") -> Plan | None:
        """The plan of a request with nothing pending (no trigger, no compaction just made or undone)
        under the soft limit, or in the soft zone when no stage changes a message sent (a long chat of
        short messages): what the general path decides then, in a few lookups. None otherwise.
        `est` and `h`: the request at no stage as counted (`counted`: "estimate" by the calibrated
        heuristic, or "exact": tiktoken's near the limits, each stage's request then being the same
        messages and so the same count) and by the plain heuristic; `framed`: the frame of the cut."""
        p = self.policy
        jh, js, joined, kept_fu, head_h = framed
        if est <= self._soft_limit:
            zone, level, near_start = "safe", 0, n
        elif est <= self._hard_limit and n >= p.fast_path_min_messages \
                and not self.index.ledger.changes(self._stage_levels, js, n):
            # every stage level sends this same request: the search (`SoftZone.fit`) ends at the highest
            zone, level = "soft", self._stage_levels[-1] if self._stage_levels else 0
            near_start = self.index.near_start(level, js, n)
        else:
            return None
        # positional: keyword arguments cost a dataclass of this size several times its construction
        plan = Plan(stamp[0], n, cut, js, level, near_start, kept_fu, jh, stamp[1], est, est, zone,
                    counted, est <= p.window, counted, False, None, {}, [], stamp[2], None, level,
                    near_start, cut, joined, None, h, None, head_h)
        prev = self.prefix.previous
        if prev is not None and prev.head is jh and prev.start == js and prev.built is None \
                and (zone == "soft" or not (prev.level or prev.lower)):
            # the same head, and no message sent changed by a stage on either side (in the soft zone
            # here, no stage level changes any): the request is the previous one up to the first
            # message changed or added since
            end = min(prev.n, n, self.prefix.changed_from)
            if end >= js:
                # CachePrefix.tokens finds no message sent otherwise before `end` (`first_changed`: the
                # ledger's ranks step at none in [js, n) at either side's levels) and returns the share of
                # the request's heuristic figure less [end, n) at this level, which is level 0's there
                prefix = self.index.ledger.prefix   # level 0: ledger.tokens is a difference of prefix sums
                plan.stable_prefix_tokens = counted_as_sent(self.meter.calibration, plan,
                                                            head_h + prefix[end] - prefix[js])
        return plan

    def from_kept_boundary(self, n: int, cut: int, framed: tuple, base: int, plain: int,
                           stamp: tuple, counted: str = "estimate") -> Plan | None:
        """The plan of a request over the soft limit with nothing pending (no trigger, no compaction
        just made or undone), when the general path would neither compact nor search a boundary nor
        shape the history: the first stage level whose whole request is under the soft limit,
        applied as far as the boundary kept for it, or the highest level, whole, when none is under
        the soft limit but that is under the hard one. None otherwise: the general path decides.
        `base` and `plain`: the request at no stage as counted (`counted`) and by the plain heuristic;
        `framed`: the frame of the cut. Each request shape is counted as the general path counts it
        (`_shapes`), so that near the limits tiktoken's counts decide here as they decide there."""
        p = self.policy
        if n < p.fast_path_min_messages or self.deep.last_failure or p.clear_at_least_tokens or p.mask_batch_tokens \
                or self.gated:
            return None   # too short for the soft zone to be searched; a note to give; masking or a step weighed
        soft, hard = self._soft_limit, self._hard_limit
        jh, js, joined, kept_fu, head_h = framed
        levels = self._stage_levels
        near = self.index.near_start(2, js, n)   # working memory, from masking up: one form whatever the level
        shape = self._shapes(framed, n, near)
        if base > hard and p.deep_compact and (p.deep_compact_first or not levels or shape(levels[-1])[0] > hard):
            return None   # a deep compaction
        level = lower = below = 0
        sent, how, h, ns = base, counted, plain, n
        for lv in levels:
            sent, how, h = shape(lv)
            level = lower = lv
            ns = n if lv < 2 else near
            if sent <= soft:
                kept = self.soft_zone.kept(cut, lv, below)
                if kept is None or not js <= kept <= ns:
                    return None   # the boundary is searched
                boundary = ns
                if kept < ns:
                    # before the kept boundary at `lv`, after it at `below`
                    sent, how, h = shape(lv, below, kept)
                    if sent > soft:
                        return None   # the boundary moves
                    lower, boundary = below, kept
                break
            below = lv
        else:
            if sent > hard:
                return None   # shape history
            boundary = ns
        zone = "soft" if base <= hard else "hard"
        # positional, as in under_soft
        return Plan(stamp[0], n, cut, js, level, ns, kept_fu, jh, stamp[1], base, sent, zone,
                    how, sent <= p.window, counted, False, None, {}, [], stamp[2], None, lower,
                    boundary, cut, joined, None, h, None, head_h)

    def _shapes(self, framed: tuple, n: int, near: int):
        """(tokens, how counted, plain heuristic) of the request from the frame `framed` to `n` at stage
        `level`, or at `level` before a boundary `kept` and `below` after it, working memory from `near`:
        the meter's count near the limits (`Meter.measure`, the general path's), else the calibrated
        heuristic from the ledger's sums in a few lookups."""
        jh, js, _, _, head_h = framed
        if self.meter.mode == "exact":
            measure = self.meter.measure
            return lambda level, below=None, kept=None: measure(jh, level, js, n if level < 2 else near, n, below,
                                                                kept, head_h)
        tokens, apply = self.index.ledger.tokens, self.meter.calibration.apply
        near_h = head_h + tokens(NEAR, near, n)

        def shape(level: int, below: int | None = None, kept: int | None = None) -> tuple[int, str, int]:
            if kept is None:
                h = head_h + tokens(level, js, n) if level < 2 else near_h + tokens(level, js, near)
            else:   # working memory at its own form when `below` masks, at `below`'s otherwise
                h = tokens(level, js, kept) + (near_h + tokens(below, kept, near) if below >= 2
                                               else head_h + tokens(below, kept, n))
            return apply(h), "estimate", h
        return shape
