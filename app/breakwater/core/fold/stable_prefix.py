"""The cache-stable prefix (SPEC §7): how much of a request is identical to the previous one, what
a provider's prompt cache can reuse, worked out from the two plans without building either request.

`CachePrefix` keeps what the next request is compared with: the previous plan and the lowest index
of the history changed since. The rest are functions of the plans, the ledger (what each message
counts at each stage level) and the stage forms (`transform`: the message a stage level makes).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable

from breakwater.core.fold.ledger import NEAR
from breakwater.core.log.tokens import heuristic_message

if TYPE_CHECKING:
    from breakwater.core.fold.ledger import Ledger
    from breakwater.core.fold.plan import Plan
    from breakwater.core.log.accounting import Calibration

    Transform = Callable[[int, int, bool], tuple | None]


class CachePrefix:
    __slots__ = ("previous", "changed_from")

    def __init__(self, previous: Plan | None = None, changed_from: int = 0):
        self.previous = previous         # the last request planned
        self.changed_from = changed_from  # lowest index of the sanitized history changed since

    def changed(self, d: int) -> None:
        """Messages from index d on changed (or were added)."""
        if d < self.changed_from:
            self.changed_from = d

    def advance(self, plan: Plan) -> None:
        """`plan` is the request sent: the next one is compared with it."""
        plan.changed_from = self.changed_from
        self.previous, self.changed_from = plan, plan.n

    def __eq__(self, other: object) -> bool:   # a snapshot's copy equals what it was copied from
        return isinstance(other, CachePrefix) and (self.previous, self.changed_from) == \
            (other.previous, other.changed_from)

    __hash__ = None

    def copy(self) -> CachePrefix:
        return CachePrefix(replace(self.previous) if self.previous is not None else None, self.changed_from)

    def tokens(self, plan: Plan, ledger: Ledger, transform: Transform, calibration: Calibration) -> int:
        """Tokens at the start of this request identical to the previous request: what a provider's
        prompt cache can reuse. Worked out from the two plans, without building either request."""
        prev = self.previous
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
            count += first_changed(ledger, transform, prev, plan, start, min(prev.n, plan.n, self.changed_from)) - start
        if prev.built is not None or plan.built is not None:
            for p_ in (prev, plan):  # a squeezed request differs from its plan from the first message squeezed on
                if p_.built is not None:
                    changed = {e.message_id for e in p_.built.edits if e.stage == "shape_history" and e.kind == "snipped"}
                    count = min(count, next((j for j, m in enumerate(p_.built.messages) if m.id in changed), count))
            if plan.built is not None:
                return counted_as_sent(calibration, plan, sum(heuristic_message(m) for m in plan.built.messages[:count]))
        if count > nh:
            # the plan counted its region already: less the part after the prefix, which is mostly
            # working memory, one part to count where the prefix is two or three
            e = start + count - nh
            h = plan.sent_heuristic - (region_tokens(ledger, plan, e, plan.n) if e < plan.n else 0)
        elif count == nh:
            h = plan.head_heuristic
        else:
            h = sum(heuristic_message(m) for m in head[:count])
        return counted_as_sent(calibration, plan, h)


    def shared(self, shape, n: int, ledger: Ledger, transform: Transform) -> int | None:
        """Heuristic tokens at the start of a request the previous one would share with it, when that
        request sends `shape` (core/fold/soft_zone.py: its head, start and stage levels) with the
        previous request's head and start; None when either differs (the start of the request changed
        for another reason) or the previous request was squeezed."""
        prev = self.previous
        if prev is None or prev.built is not None or prev.start != shape.start or prev.drop_to != prev.cut:
            return None
        head = shape.head
        if prev.head is not head and (len(prev.head) != len(head) or any(a != b for a, b in zip(prev.head, head))):
            return None
        a = shape.start
        end = first_changed(ledger, transform, prev, shape, a, min(prev.n, n, self.changed_from))
        return prev.head_heuristic + (region_tokens(ledger, prev, a, end) if end > a else 0)


def counted_as_sent(calibration: Calibration, plan: Plan, h: int) -> int:
    """Heuristic tokens `h` of the prefix (kept on the plan), counted as the request was: by the calibrated heuristic,
    or, when tiktoken counted the request, as the same share of that count. (The calibration
    factor follows the API's figures, which carry more than the messages: applied to the prefix
    of a request tiktoken counted, it gave turn 10 of long-refactor a prefix of 18,796 tokens in a
    request of 16,440.)"""
    plan.stable_prefix_heuristic = h
    return part_as_sent(calibration, plan.counted, plan.sent_tokens, plan.sent_heuristic, h)


def part_as_sent(calibration: Calibration, counted: str, sent: int, sent_heuristic: int, h: int) -> int:
    """Heuristic tokens `h` at the start of a request of `sent` tokens (`sent_heuristic` by the plain
    heuristic), in the unit the request was counted in (`counted`): see `counted_as_sent`."""
    if counted != "exact":
        return calibration.apply(h)
    # the unseen overhead (system prompt, tools), or a whole request's tool schemas, lead every request:
    # cached with the prefix
    overhead = calibration.leading
    return overhead + (sent - overhead) * h // sent_heuristic if sent_heuristic else 0

def assigned(plan: Plan, i: int) -> tuple[int, bool]:
    level, near = (plan.level if plan.boundary >= plan.near_start else plan.lower, True) \
        if i >= plan.near_start else (plan.level if i < plan.boundary else plan.lower, False)
    return level, near and level >= 2   # below masking, working memory is treated like the rest

def first_changed(ledger: Ledger, transform: Transform, prev: Plan, plan: Plan, a: int, end: int) -> int:
    """The first index in [a, end) whose sent form differs between the two plans."""
    if not (prev.level or prev.lower or plan.level or plan.lower):
        return end   # no stage on either side: every message is sent as it is
    level = plan.level
    if (prev.level == prev.lower == level == plan.lower and prev.boundary == prev.near_start
            and plan.boundary == plan.near_start and prev.near_start <= plan.near_start):
        # one stage level, whole, on both sides: only what has left working memory since is sent
        # otherwise (below masking, working memory is sent like the rest)
        if level >= 2:
            for i in ledger.changed_in(NEAR, level, max(a, prev.near_start), min(plan.near_start, end)):
                if not sent_alike(ledger, transform, i, (level, True), (level, False)):
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
        was, now = assigned(prev, x), assigned(plan, x)
        if was == now:
            continue
        # a message that neither level changes is sent alike: only the ones either changes are compared
        for i in ledger.changed_in(ledger_level(*was), ledger_level(*now), x, y):
            if not sent_alike(ledger, transform, i, was, now):
                return i
    return end

def sent_alike(ledger: Ledger, transform: Transform, i: int, was: tuple[int, bool], now: tuple[int, bool]) -> bool:
    """Whether message i is sent alike at the two (level, working memory) assignments. A stage
    changes a message's text only, so two forms the ledger counts differently differ: only forms
    of one count are built to be compared (a message leaving working memory is masked, mostly)."""
    tokens = ledger.tokens
    if tokens(ledger_level(*was), i, i + 1) != tokens(ledger_level(*now), i, i + 1):
        return False
    r1, r2 = transform(i, *was), transform(i, *now)
    return (r1[0].content if r1 else None) == (r2[0].content if r2 else None)

def ledger_level(level: int, near: bool) -> int:
    return NEAR if near else level

def region_tokens(ledger: Ledger, plan: Plan, a: int, b: int) -> int:
    """Heuristic tokens of out[a:b] (a < b) as this plan sends them: a part at a time, split where
    the stage level changes (the boundary, working memory)."""
    tokens, bd, ns = ledger.tokens, plan.boundary, plan.near_start
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
