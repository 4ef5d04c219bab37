"""How the pipeline counts a request (core/log/accounting.py): by the calibrated heuristic from the
index's sums, or, near the limits where the verdict could change, by tiktoken (or by a lower bound,
when that shows the request past every limit). Either way one prediction, `ratio × visible +
overhead` (issue 36): the tokenizer's count is brought into the fit's unit (`Calibration.apply_exact`)
rather than given the overhead alone, which put a Claude request counted exactly 23-30% low. `Meter` holds the
counter, the calibration the API's figures fit, and the request shapes one plan has counted exactly
(a plan asks for some several times).
"""

from __future__ import annotations

import json
from dataclasses import replace

from breakwater.core.fold.index import Index
from breakwater.core.fold.kept_measures import UNKNOWN, KeptMeasures
from breakwater.core.fold.plan import Plan
from breakwater.core.fold.stage_forms import near_level
from breakwater.core.log.accounting import Calibration
from breakwater.core.log.message import Message
from breakwater.core.log.tokens import TokenCounter, heuristic_message, heuristic_text, lower_message
from breakwater.core.policy import Policy

# tokens <= UTF-8 bytes (a token is at least one byte), and a text's bytes are at most this many times
# its heuristic count (ASCII: 4 per token counted; 4-byte characters: 2 per token counted, 8 bytes)
BYTES_PER_HEURISTIC_TOKEN = 8
HEADS_KEPT = 8   # heads whose counts a new plan keeps (one, mostly: the frame of the cut)


def estimated_figure(counted: str, whole: bool, calibration: Calibration) -> bool:
    """Whether a request's figure is the heuristic's line (shown ≈) rather than the tokenizer's count on
    it: counted by the heuristic, or the log whole (the line's figure, Meter.settle), or no usage recorded
    (every figure the heuristic's, `Calibration.figure`), whichever count decided its verdicts."""
    return counted != "exact" or whole or not calibration.samples


class Meter:
    def __init__(self, policy: Policy, index: Index, counter: TokenCounter, mode: str):
        self.policy = policy
        self.index = index
        self.counter = counter
        self.mode = counter.in_effect(mode)
        self.calibration = Calibration()
        self._measured: dict[tuple, tuple] = {}   # one plan's counted request shapes
        # the heads of the requests measured, each counted once (a plan measures ~7 shapes, most with
        # the same head, and the next plans mostly send that head again: core/fold/frames.py keeps it):
        # [messages, bound, exact] by id(head); the history, working memory too, is summed by the index
        self._parts: dict[object, list] = {}
        self._first = True   # the next measure is the plan's first: its request at no stage
        self.kept = KeptMeasures(index, counter, policy)   # the figures of earlier runs' plans
        self._precise_from = policy.precise_from   # a property worked out for every request shape measured

    def copy(self, index: Index) -> Meter:
        """An independent copy counting from `index` (the index's copy)."""
        new = Meter.__new__(Meter)
        new.__dict__.update(policy=self.policy, index=index, counter=self.counter, mode=self.mode,
                            calibration=replace(self.calibration), _measured=self._measured.copy(),
                            _parts={k: v[:] for k, v in self._parts.items()}, _first=self._first,
                            kept=self.kept.copy(index), _precise_from=self._precise_from)
        return new

    def retune(self, policy: Policy) -> None:
        self.policy = policy
        self._precise_from = policy.precise_from
        self.kept.retune(policy)
        self._measured.clear()   # measured against the old limits
        self._parts.clear()

    def new_plan(self) -> None:
        """A new request is planned: what the last one counted may have changed."""
        self._measured = {}
        if len(self._parts) > HEADS_KEPT:
            # a head's counts stay while its messages do (the entry holds the list, which no one changes
            # in place, so no other list takes its id): a chat of a million short messages counted its
            # system prompt exactly once a request
            self._parts = {}
        self._first = True
        self.calibration.freeze()

    def whole_request(self, tools: object = None) -> None:
        """The log shows the whole request (a proxy's request note, core/log/accounting.py `whole`); `tools`:
        the tool schemas it carries from now on, as the note gives them (None: unchanged), counted as the
        wire carries them: compact JSON."""
        self.calibration.whole = True
        if tools is not None:
            self.calibration.frame = heuristic_text(json.dumps(tools, ensure_ascii=False, separators=(",", ":"))) \
                if tools else 0

    def in_band(self, heuristic: int) -> bool:
        """Whether tiktoken counts a request of `heuristic` plain tokens: whenever the verdict (the zone,
        `fits`) could change. The heuristic undercounts some text up to ~8× (hex ~2.3×, base64 ~2.7×,
        emoji ~5×, rare CJK ~7.7×) and overcounts other text (runs of spaces), so it decides alone only
        when even its bound on tokens, the request's UTF-8 bytes, stays under `precise_from`."""
        return self.mode == "exact" and \
            self.calibration.apply_exact(BYTES_PER_HEURISTIC_TOKEN * heuristic) >= self._precise_from

    def count(self, msgs: list[Message]) -> tuple[int, str]:
        """Tokens of a request: the fitted line of the heuristic's count, or near the limits of tiktoken's."""
        h = sum(heuristic_message(m) for m in msgs)
        if self.in_band(h):
            # as `measure` decides it; a bound is at most twice the heuristic
            est = self.calibration.apply(h)
            lo = sum(lower_message(m) for m in msgs) if self._maybe_past(est, 2 * h) else 0
            if self._past_limits(est, lo):
                return self._bounded(est, lo), "estimate"
            return self.calibration.apply_exact(self.counter.exact_messages(msgs), h), "exact"
        return self.calibration.apply(h), "estimate"

    def _past_limits(self, estimate: int, lower: int) -> bool:
        """Whether a request estimated at `estimate` and of at least `lower` visible tokens (core/log/tokens.py
        `lower_message`) is counted as an estimate: when both are past the window. It is then past every
        limit a verdict or the soft-zone search compares it with, and tiktoken's count would change none
        of them (a history far past the hard limit, tens of MB on a long session, was encoded only to find
        it so). The estimate past the window too: the bound, ~0.3 of the count, is worked out only for
        a request likely to be past it by that much, never for one near the limits."""
        return estimate > self.policy.window and self.calibration.apply_exact(lower) > self.policy.window

    _maybe_past = _past_limits   # with an upper bound on `lower`: whether working it out may tell

    def _bounded(self, estimate: int, lower: int) -> int:
        """The figure of a request `_past_limits` decided: the estimate, raised to the bound where the
        heuristic undercounts, so that it is past every limit as the request is."""
        return max(estimate, self.calibration.apply_exact(lower))

    def measure(self, head: list[Message], level: int, start: int, near_start: int, n: int,
                lower: int | None = None, boundary: int | None = None,
                head_tokens: int | None = None) -> tuple[int, str, int]:
        """Tokens of head + out[start:n]: far messages before `boundary` at `level`, the rest of the far
        ones at `lower`; working memory (from near_start) at `level` when the stage is whole, else `lower`.
        Returns the count, whether it is exact, and the plain heuristic figure."""
        index = self.index
        tokens = index.ledger.tokens
        first, self._first = self._first, False
        h = sum(heuristic_message(m) for m in head) if head_tokens is None else head_tokens
        # an empty part costs two bisections for nothing, and a request of a plan has one or two
        if boundary is not None and lower is not None and boundary < near_start:
            far = tokens(level, start, boundary) + tokens(lower, boundary, near_start)
            near = lower
        else:
            far = tokens(level, start, near_start)
            lower, boundary, near = level, near_start, level
        h += far
        if near_start < n:
            h += tokens(near_level(near), near_start, n)
        est = self.calibration.apply(h)
        if not self.in_band(h):   # a few lookups: cheaper than remembering them
            return est, "estimate", h
        # one plan asks for the same request shape several times (zone, stages, shaping): counted once each
        key = (id(head), level, start, near_start, n, lower, boundary)
        hit = self._measured.get(key)
        if hit is not None:
            return hit[0]
        heads, near = self._part(id(head), head), near_level(near)
        # the figures are kept by the plan's content (core/fold/kept_measures.py): a reopen finds them
        kept, worked = self.kept.figures(head, key[1:]), False
        lo = 0
        if self._maybe_past(est, 2 * h):   # a message's bound is at most twice its heuristic count
            if kept[0] == UNKNOWN:
                kept[0] = index.lower_sum(level, start, boundary) + index.lower_sum(lower, boundary, near_start)
                worked = True
            lo = kept[0]
            if self._maybe_past(est, lo + 2 * (h - far)):   # the rest's only when it may tell
                if kept[1] == UNKNOWN:
                    kept[1] = self._counted(heads, 1, lower_message) + index.lower_sum(near, near_start, n)
                    worked = True
                lo += kept[1]
        if self._past_limits(est, lo):
            result = self._bounded(est, lo), "estimate", h
        else:
            if kept[2] == UNKNOWN:
                x = self._counted(heads, 2, self.counter.exact_message) + index.exact_sum(near, near_start, n)
                kept[2] = x + index.exact_sum(level, start, boundary) + index.exact_sum(lower, boundary, near_start)
                worked = True
            x = kept[2]
            if first:   # the request at no stage, which every path of a plan measures first: k is one figure
                self.calibration.exact(x, h)   # whichever path planned (the short cuts measure fewer shapes)
            result = self.calibration.apply_exact(x, h), "exact", h   # the line `apply` draws, in the same unit
        if worked:
            self.kept.changed()
        self._measured[key] = (result, head)   # the head is kept so its id stays unique for the plan
        return result

    def settle(self, plan: Plan) -> None:
        """The figures a completed plan reports (`raw_tokens` holds the log's heuristic count until then):
        the request sent and the history without compaction, each in the provider's tokens.

        Without compaction is the whole log, a property of the transcript (issue 36): one figure a turn
        whatever the policy, the window, the overlay's history or the counter, on the line every request is
        counted by (core/log/accounting.py), so that saved = without − with. Where nothing was edited and
        the request is the log whole, the two are one request and one figure, the line's, however it was
        counted (saved 0): the tokenizer counts only the requests near the limits, which the window decides,
        and its figure made without depend on the window and the counter (npm-install-flood, turn 3: 4,374
        where o200k counted it, 3,104 on the line, billed 3,169; OpenHands' fncall log, no usage, turn 1:
        2,142 against 2,563). With no usage every figure is the heuristic's (`Calibration.figure`). The
        verdicts (the zone, `fits`) stay the count's: a request the tokenizer found past the window is no
        fit, whatever the line says."""
        calibration = self.calibration
        whole = not plan.counts and plan.sent_heuristic == plan.raw_tokens
        plan.estimated = estimated_figure(plan.counted, whole, calibration)
        plan.raw_tokens = calibration.apply(plan.raw_tokens)
        if whole:
            plan.whole = True
            plan.sent_tokens = plan.raw_tokens
        else:
            plan.sent_tokens = calibration.figure(plan.sent_tokens, plan.sent_heuristic)
        # (`counted` stays the path's: which count decided the verdicts; with no usage the figure is the
        # heuristic's whatever it says, and raises nothing)
        if not whole and calibration.samples and plan.counted == "exact":
            # the tokenizer found more in the request sent than the heuristic in the whole log (hex,
            # base64: the heuristic undercounts them): the request without compaction is at least it.
            # Only there: a request counted by the heuristic that is larger holds more text (a summary
            # longer than what it replaced, the sanitizer's stand-ins), and raising it made without
            # depend on the policy (issue 36). This one still depends on the window (round 6's note)
            plan.raw_tokens = max(plan.raw_tokens, plan.sent_tokens)

    def _part(self, key: object, msgs: list[Message]) -> list:
        """[msgs, bound, exact] of a part of this plan's requests (the bound and count when first asked)."""
        part = self._parts.get(key)
        if part is None or part[0] is not msgs:
            part = self._parts[key] = [msgs, None, None]
        return part

    @staticmethod
    def _counted(part: list, slot: int, count) -> int:
        if part[slot] is None:
            part[slot] = sum(count(m) for m in part[0])
        return part[slot]
