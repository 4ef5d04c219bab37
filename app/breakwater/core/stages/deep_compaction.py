"""Deep compaction (SPEC §4, stage 5): the summary that replaces the history before a cut, as the
log records it, and the seed's rules for where to cut. The compactions in effect, and deciding a new
one, are core/fold/compactions.py's.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Callable, Sequence

from breakwater.core.log.message import Message
from breakwater.core.log.session_log import Event
from breakwater.core.policy import Policy
from breakwater.core.stages.sanitize import SanitizedMessage

# the note of a request whose compaction waits: no summary would bring it under the soft limit
WAITS = "compaction waits"
EST_SUMMARY_TOKENS = 600   # a summary not yet written, as a cut is chosen before it
RECORDED = "recorded"   # trigger of a compaction that another agent did; replay always re-applies it


@dataclass(frozen=True, slots=True)
class Compaction:
    """A deep compaction: the messages before `cut_id` are replaced by `summary`."""

    id: str
    cut_id: str | None        # first message kept after the summary (None: nothing after it)
    summary: str
    summarizer: str
    trigger: str              # auto | manual | context_length | recorded (done by the agent of an imported transcript)
    policy: str               # fingerprint of the policy that decided it
    turn: int
    tokens_before: int = 0
    tokens_after: int = 0
    covered: int = 0

    def to_event(self) -> Event:
        return Event("compaction", self.id, {
            "stage": "deep_compact", "trigger": self.trigger, "cut_id": self.cut_id, "summary": self.summary,
            "summarizer": self.summarizer, "policy": self.policy, "turn": self.turn,
            "tokens_before": self.tokens_before, "tokens_after": self.tokens_after, "covered": self.covered})

    @classmethod
    def from_event(cls, ev: Event) -> "Compaction":
        return cls(ev.id, ev.get("cut_id"), str(ev.get("summary") or ""), str(ev.get("summarizer") or "?"),
                   str(ev.get("trigger") or "auto"), str(ev.get("policy") or ""), int(ev.get("turn") or 0),
                   int(ev.get("tokens_before") or 0), int(ev.get("tokens_after") or 0), int(ev.get("covered") or 0))


@dataclass(slots=True)
class Active:
    comp: Compaction
    cut: int                  # index into the sanitized list
    message: Message          # the summary message sent in place of the covered history


def follows(chain: list[Active], placed: Active) -> bool:
    """Whether `placed` applies after the compactions of `chain`: not one of them, and not cutting before the last."""
    return not any(a.comp.id == placed.comp.id for a in chain) and not (chain and placed.cut < chain[-1].cut)


def choose_cut(p: Policy, out: Sequence[SanitizedMessage], cands: Sequence[int], start: int, n: int,
               fits: Callable[[int], bool], kept_tokens: Callable[[int], int]) -> int:
    """Where to cut the history out[start:n] (SPEC §4, stage 5), among `cands`, the turns' first
    messages after `start`, by the policy's rule: the seed's last safe boundary, its last turns that
    fit, or the longest tail within a budget. `fits(c)`: whether a request cut at c fits the hard
    limit; `kept_tokens(c)`: the tokens of out[c:n] as logged."""
    if not cands:
        return start
    last = cands[-1]
    if p.deep_cut == "last-boundary":   # seed 000 findSafeCutPoint
        for i in range(n - 1, start, -1):
            m = out[i].message
            if m.role == "user":
                return min(i, last)
            if m.role == "assistant" and not m.tool_calls:
                return min(i + 1, last)
            if m.role == "assistant" and out[i - 1].message.role == "tool":
                return i  # after all results of a call group: a single-prompt agent run compacts too
        return start
    if p.deep_cut == "keep-turns":       # seed 003: keep the last N turns, N = 20 -> 3
        for keep in range(p.shape_keep_last_max, p.shape_keep_last_min - 1, -1):
            if keep <= len(cands) and fits(cands[-keep]):
                return cands[-keep]
        return cands[-min(p.shape_keep_last_min, len(cands))]
    if p.deep_cut == "keep-messages":    # OpenHands' condenser, LangChain's summarization: the last N messages
        # the last turn start that keeps at least N messages, so a call never loses its results
        k = bisect.bisect_right(cands, n - p.deep_keep_messages) - 1
        if k < 0:
            return start   # no more than N messages: nothing to summarize
        while k < len(cands) - 1 and not fits(cands[k]):
            k += 1
        return cands[k]
    budget = p.deep_keep_tokens or int(p.deep_keep_ratio * p.window)   # keep-tokens
    # the longest tail within the budget: the tail shrinks as the cut moves on, so a binary search
    lo, hi = 0, len(cands) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if kept_tokens(cands[mid]) <= budget:
            hi = mid
        else:
            lo = mid + 1
    k = lo
    while k < len(cands) - 1 and not fits(cands[k]):
        k += 1  # the kept tail must fit, or shaping would drop messages no summary covers
    return cands[k]
