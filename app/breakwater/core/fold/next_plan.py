"""The plan of a request the soft zone's search would end where it ended before (issue 7 item 18):
most requests of a long agent session send the history from the same cut, at the same stage
level, up to the same kept boundary, while results are appended. The general path (`plan`,
`_fit`) finds that by building and counting a request shape per step; here it is a few lookups
of the ledger's sums.

`NextPlan` is a part of `Pipeline` (core/fold/pipeline.py).
"""

from __future__ import annotations

from breakwater.core.fold.ledger import NEAR
from breakwater.core.fold.plan import Plan


class NextPlan:
    def _plan_next(self, n: int, cut: int, framed: tuple, base: int, plain: int) -> Plan | None:
        """The plan of a request over the soft limit with nothing pending (no trigger, no compaction
        just made or undone), when the general path would neither compact nor search a boundary nor
        shape the history: the first stage level whose whole request is under the soft limit,
        applied as far as the boundary kept for it, or the highest level, whole, when none is under
        the soft limit but that is under the hard one. None otherwise: the general path decides.
        `base` and `plain`: the request at no stage by the calibrated and the plain heuristic, an
        estimate; `framed`: `_frame` of the cut."""
        p = self.policy
        if n < p.fast_path_min_messages or self._last_failure:
            return None   # too short for the soft zone to be searched; a note to give
        soft, hard = self._soft_limit, self._hard_limit
        jh, js, joined, kept_fu, head_h = framed
        tokens = self.ledger.tokens   # the parts of the request, as `_measure` adds them up
        apply = self.calibration.apply
        exact = self.mode == "exact"
        levels = self._stage_levels
        near = self._near_start(2, js, n)   # working memory, from masking up: one form whatever the level
        near_h = head_h + tokens(NEAR, near, n)
        wholes = []   # (calibrated, plain) of the request at each stage level throughout
        for lv in levels:
            h = head_h + tokens(lv, js, n) if lv < 2 else near_h + tokens(lv, js, near)
            t = apply(h)
            if exact and self._in_band(h):
                return None   # tiktoken counts it
            wholes.append((t, h))
        if base > hard and p.deep_compact and (p.deep_compact_first or not levels or wholes[-1][0] > hard):
            return None   # a deep compaction
        level = lower = below = 0
        sent, h, ns = base, plain, n
        for lv, (sent, h) in zip(levels, wholes):
            level = lower = lv
            ns = n if lv < 2 else near
            if sent <= soft:
                kept = self._soft_boundary.get((cut, lv, below))
                if kept is None or not js <= kept <= ns:
                    return None   # the boundary is searched
                boundary = ns
                if kept < ns:
                    # before the kept boundary at `lv`, after it at `below`; working memory too, but at
                    # its own form when `below` masks
                    h = tokens(lv, js, kept) + (near_h + tokens(below, kept, ns) if below >= 2
                                                else head_h + tokens(below, kept, n))
                    sent = apply(h)
                    if sent > soft or (exact and self._in_band(h)):
                        return None   # the boundary moves
                    lower, boundary = below, kept
                break
            below = lv
        else:
            if sent > hard:
                return None   # shape history
            boundary = ns
        zone = "soft" if base <= hard else "hard"
        # positional, as in _plan_safe
        return Plan(self.turn + 1, n, cut, js, level, ns, kept_fu, jh, self._raw_tokens(), base, sent, zone,
                    "estimate", sent <= p.window, "estimate", False, None, {}, [], self.api_tokens, None, lower,
                    boundary, cut, joined, None, h, None, head_h)
