"""How the pipeline counts a request (core/log/accounting.py): by the calibrated heuristic from the
index's sums, or, near the limits where the verdict could change, by tiktoken plus the unseen
overhead. `Meter` holds the counter, the calibration the API's figures fit, and the request shapes
one plan has counted exactly (a plan asks for some several times).
"""

from __future__ import annotations

from dataclasses import replace

from breakwater.core.fold.index import Index
from breakwater.core.fold.stage_forms import near_level
from breakwater.core.log.accounting import Calibration
from breakwater.core.log.message import Message
from breakwater.core.log.tokens import TokenCounter, heuristic_message
from breakwater.core.policy import Policy

# tokens <= UTF-8 bytes (a token is at least one byte), and a text's bytes are at most this many times
# its heuristic count (ASCII: 4 per token counted; 4-byte characters: 2 per token counted, 8 bytes)
BYTES_PER_HEURISTIC_TOKEN = 8


class Meter:
    def __init__(self, policy: Policy, index: Index, counter: TokenCounter, mode: str):
        self.policy = policy
        self.index = index
        self.counter = counter
        self.mode = mode if counter.exact_available else "heuristic"
        self.calibration = Calibration()
        self._measured: dict[tuple, tuple] = {}   # one plan's counted request shapes

    def copy(self, index: Index) -> Meter:
        """An independent copy counting from `index` (the index's copy)."""
        new = Meter.__new__(Meter)
        new.__dict__.update(policy=self.policy, index=index, counter=self.counter, mode=self.mode,
                            calibration=replace(self.calibration), _measured=self._measured.copy())
        return new

    def retune(self, policy: Policy) -> None:
        self.policy = policy
        self._measured.clear()   # measured against the old limits

    def new_plan(self) -> None:
        """A new request is planned: what the last one counted may have changed."""
        self._measured = {}

    def in_band(self, heuristic: int) -> bool:
        """Whether tiktoken counts a request of `heuristic` plain tokens: whenever the verdict (the zone,
        `fits`) could change. The heuristic undercounts some text up to ~8× (hex ~2.3×, base64 ~2.7×,
        emoji ~5×, rare CJK ~7.7×) and overcounts other text (runs of spaces), so it decides alone only
        when even its bound on tokens, the request's UTF-8 bytes, stays under `precise_from`."""
        return self.mode == "exact" and \
            BYTES_PER_HEURISTIC_TOKEN * heuristic + self.calibration.overhead >= self.policy.precise_from

    def count(self, msgs: list[Message]) -> tuple[int, str]:
        """Tokens of a request: the fitted heuristic, or near the limits tiktoken's count plus the unseen
        overhead."""
        h = sum(heuristic_message(m) for m in msgs)
        if self.in_band(h):
            return self.counter.exact_messages(msgs) + self.calibration.overhead, "exact"
        return self.calibration.apply(h), "estimate"

    def measure(self, head: list[Message], level: int, start: int, near_start: int, n: int,
                lower: int | None = None, boundary: int | None = None,
                head_tokens: int | None = None) -> tuple[int, str, int]:
        """Tokens of head + out[start:n]: far messages before `boundary` at `level`, the rest of the far
        ones at `lower`; working memory (from near_start) at `level` when the stage is whole, else `lower`.
        Returns the count, whether it is exact, and the plain heuristic figure."""
        index = self.index
        tokens = index.ledger.tokens
        h = sum(heuristic_message(m) for m in head) if head_tokens is None else head_tokens
        # an empty part costs two bisections for nothing, and a request of a plan has one or two
        if boundary is not None and lower is not None and boundary < near_start:
            h += tokens(level, start, boundary) + tokens(lower, boundary, near_start)
            near = lower
        else:
            h += tokens(level, start, near_start)
            lower, boundary, near = level, near_start, level
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
        c = self.counter
        x = sum(c.exact_message(m) for m in head)
        x += index.exact_sum(level, start, boundary) + index.exact_sum(lower, boundary, near_start)
        out = index.san.out
        for i in range(near_start, n):
            r = index.near_cached(i, near)[0]
            x += c.exact_message(r[0] if r else out[i].message)
        result = x + self.calibration.overhead, "exact", h   # visible + unseen, as `apply` counts
        self._measured[key] = (result, head)   # the head is kept so its id stays unique for the plan
        return result
