"""The cache-stable prefix (SPEC §7): how much of a request is identical to the previous one, what
a provider's prompt cache can reuse, worked out from the two plans without building either request.

`StablePrefix` is a part of `Pipeline` (core/fold/pipeline.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from breakwater.core.fold import materialize as build
from breakwater.core.fold.ledger import NEAR
from breakwater.core.log.tokens import heuristic_message

if TYPE_CHECKING:
    from breakwater.core.fold.plan import Plan


class StablePrefix:
    def _finish(self, plan: Plan) -> Plan:
        plan.counts = build.counts(self, plan)
        if plan.squeeze:
            view = plan.built = self.materialize(plan)
            plan.sent_tokens, plan.counted, plan.fits = view.sent_tokens, view.counted, view.fits
            plan.counts = view.edit_counts()
            plan.sent_heuristic = sum(heuristic_message(m) for m in view.messages)
        if plan.stable_prefix_tokens is None:
            plan.stable_prefix_tokens = self._stable_prefix(plan)
        # without compaction: this request plus what the policy took out of the whole log, counted
        # by the same calibration (core/log/accounting.py), so that saved = without − with
        plan.raw_tokens = plan.sent_tokens + self.calibration.scale(plan.raw_tokens - plan.sent_heuristic)
        if plan.built is not None:
            plan.built = replace(plan.built, stable_prefix_tokens=plan.stable_prefix_tokens,
                                 raw_tokens=plan.raw_tokens)
        plan.changed_from = self._changed_from
        self._previous, self._changed_from = plan, plan.n
        return plan

    # -- the cache-stable prefix (SPEC §7) --------------------------------------------------------------
    def _stable_prefix(self, plan: Plan) -> int:
        """Tokens at the start of this request identical to the previous request: what a provider's
        prompt cache can reuse. Worked out from the two plans, without building either request."""
        prev = self._previous
        if prev is None:
            return 0
        head, start = plan.head, plan.start
        nh = len(head)
        if prev.head is head:
            k = nh
            same = prev.start == start
        else:
            k = 0
            while k < len(prev.head) and k < nh and prev.head[k] == head[k]:
                k += 1
            same = k == len(prev.head) == nh and prev.start == start
        count = k
        if same:
            count += self._first_changed(prev, plan, start, min(prev.n, plan.n, self._changed_from)) - start
        if prev.built is not None or plan.built is not None:
            for p_ in (prev, plan):  # a squeezed request differs from its plan from the first message squeezed on
                if p_.built is not None:
                    changed = {e.message_id for e in p_.built.edits if e.stage == "shape_history" and e.kind == "snipped"}
                    count = min(count, next((j for j, m in enumerate(p_.built.messages) if m.id in changed), count))
            if plan.built is not None:
                return self._counted_as_sent(plan, sum(heuristic_message(m) for m in plan.built.messages[:count]))
        if count > nh:
            # the plan counted its region already: less the part after the prefix, which is mostly
            # working memory, one part to count where the prefix is two or three
            e = start + count - nh
            h = plan.sent_heuristic - (self._region_tokens(plan, e, plan.n) if e < plan.n else 0)
        elif count == nh:
            h = plan.head_heuristic
        else:
            h = sum(heuristic_message(m) for m in head[:count])
        return self._counted_as_sent(plan, h)

    def _counted_as_sent(self, plan: Plan, h: int) -> int:
        """Heuristic tokens `h` of the prefix, counted as the request was: by the calibrated heuristic,
        or, when tiktoken counted the request, as the same share of that count. (The calibration
        factor follows the API's figures, which carry more than the messages: applied to the prefix
        of a request tiktoken counted, it gave turn 10 of long-refactor a prefix of 18,796 tokens in a
        request of 16,440.)"""
        if plan.counted != "exact":
            return self.calibration.apply(h)
        # the unseen overhead (system prompt, tools) leads every request: cached with the prefix
        overhead = self.calibration.overhead
        return overhead + (plan.sent_tokens - overhead) * h // plan.sent_heuristic if plan.sent_heuristic else 0

    @staticmethod
    def _assigned(plan: Plan, i: int) -> tuple[int, bool]:
        level, near = (plan.level if plan.boundary >= plan.near_start else plan.lower, True) \
            if i >= plan.near_start else (plan.level if i < plan.boundary else plan.lower, False)
        return level, near and level >= 2   # below masking, working memory is treated like the rest

    def _first_changed(self, prev: Plan, plan: Plan, a: int, end: int) -> int:
        """The first index in [a, end) whose sent form differs between the two plans."""
        if not (prev.level or prev.lower or plan.level or plan.lower):
            return end   # no stage on either side: every message is sent as it is
        level = plan.level
        if (prev.level == prev.lower == level == plan.lower and prev.boundary == prev.near_start
                and plan.boundary == plan.near_start and prev.near_start <= plan.near_start):
            # one stage level, whole, on both sides: only what has left working memory since is sent
            # otherwise (below masking, working memory is sent like the rest)
            if level >= 2:
                for i in self.ledger.changed_in(NEAR, level, max(a, prev.near_start), min(plan.near_start, end)):
                    if not self._sent_alike(i, (level, True), (level, False)):
                        return i
            return end
        if prev.level == level and prev.lower == plan.lower and prev.boundary == plan.boundary:
            # before both working memories every message is far on both sides, each side of the same
            # boundary at the same level: sent alike
            near = min(prev.near_start, plan.near_start)
            if plan.boundary < near and plan.lower < 2:
                return end   # and after the boundary, working memory too: below masking it is sent like the rest
            a = max(a, near)
            if a >= end:
                return end
        cuts = sorted({a, end} | {x for x in (prev.boundary, prev.near_start, plan.boundary, plan.near_start)
                                  if a < x < end})
        for x, y in zip(cuts, cuts[1:]):
            was, now = self._assigned(prev, x), self._assigned(plan, x)
            if was == now:
                continue
            # a message that neither level changes is sent alike: only the ones either changes are compared
            for i in self.ledger.changed_in(self._ledger_level(*was), self._ledger_level(*now), x, y):
                if not self._sent_alike(i, was, now):
                    return i
        return end

    def _sent_alike(self, i: int, was: tuple[int, bool], now: tuple[int, bool]) -> bool:
        """Whether message i is sent alike at the two (level, working memory) assignments. A stage
        changes a message's text only, so two forms the ledger counts differently differ: only forms
        of one count are built to be compared (a message leaving working memory is masked, mostly)."""
        tokens = self.ledger.tokens
        if tokens(self._ledger_level(*was), i, i + 1) != tokens(self._ledger_level(*now), i, i + 1):
            return False
        r1, r2 = self._transform(i, *was), self._transform(i, *now)
        return (r1[0].content if r1 else None) == (r2[0].content if r2 else None)

    @staticmethod
    def _ledger_level(level: int, near: bool) -> int:
        return NEAR if near else level

    def _region_tokens(self, plan: Plan, a: int, b: int) -> int:
        """Heuristic tokens of out[a:b] (a < b) as this plan sends them: a part at a time, split where
        the stage level changes (the boundary, working memory)."""
        tokens, bd, ns = self.ledger.tokens, plan.boundary, plan.near_start
        if a >= ns and a >= bd:   # working memory only, mostly: one part
            level = plan.level if bd >= ns else plan.lower
            return tokens(NEAR if level >= 2 else level, a, b)
        total, x = 0, a
        for y in (min(bd, ns), max(bd, ns), b):
            if x < y <= b:
                level = (plan.level if bd >= ns else plan.lower) if x >= ns else (plan.level if x < bd else plan.lower)
                total += tokens(NEAR if x >= ns and level >= 2 else level, x, y)
                x = y
        return total
