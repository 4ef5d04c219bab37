"""Deep compaction (SPEC §4, stage 5): where to cut, the summary that replaces the history before
the cut, and the head of a request after it ([System][First user][Summary][pinned turns]).

`DeepCompaction` is a part of `Pipeline` (core/fold/pipeline.py).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from breakwater.core.log.message import Message
from breakwater.core.log.tokens import heuristic_message
from breakwater.core.log.session_log import Event
from breakwater.core.stages.extractive import ExtractiveSummarizer
from breakwater.core.stages.summarize import summary_message_text

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
class _Active:
    comp: Compaction
    cut: int                  # index into the sanitized list
    message: Message          # the summary message sent in place of the covered history


def follows(chain: list[_Active], placed: _Active) -> bool:
    """Whether `placed` applies after the compactions of `chain`: not one of them, and not cutting before the last."""
    return not any(a.comp.id == placed.comp.id for a in chain) and not (chain and placed.cut < chain[-1].cut)




class DeepCompaction:
    def _base_start(self) -> int:
        out = self.san.out
        return 1 if out and out[0].message.role == "system" else 0

    def _first_user(self) -> int | None:
        if self._fu is None:
            out = self.san.out
            for i in range(self._fu_scanned, len(out)):
                if out[i].message.role == "user":
                    self._fu = i
                    break
            else:
                self._fu_scanned = len(out)
        return self._fu

    def _apply(self, comp: Compaction) -> None:
        placed = self._placed(comp)
        if placed is not None:
            self._admit(placed)

    def _admit(self, placed: _Active) -> bool:
        """Apply `placed`, unless already applied (the caller fed back the event we returned) or out of order."""
        if not follows(self.active, placed):
            return False
        self.active.append(placed)
        self.compactions_applied += 1
        self._compacted_since_view = True
        return True

    def _placed(self, comp: Compaction) -> _Active | None:
        """`comp` where it cuts the sanitized history; None when the log does not hold the message it
        names (ignored rather than guessed)."""
        out = self.san.out
        if comp.cut_id is None:
            # the summary covers everything so far: calls still waiting for results are closed
            # now, or stripping them later would leave the cut past the end
            self.san.close_group()
            cut = len(out)
        else:
            cut = self._index_of(comp.cut_id)
            if cut is None or cut >= len(out) or comp.cut_id not in out[cut].sources:
                return None
        msg = Message(id=f"summary:{comp.id}", role="user", content=summary_message_text(comp.summary),
                      turn=comp.turn, meta={"compaction": comp.id})
        return _Active(comp, cut, msg)

    def _head(self) -> tuple[list[Message], int | None]:
        return self._head_after(self.active[-1] if self.active else None, self.policy.keep_first_user)

    def _head_after(self, last: _Active | None, keep_first_user: bool) -> tuple[list[Message], int | None]:
        """[System][First user][Summary][pinned turns] after the compaction `last` (the system prompt alone
        before any), and the index of the first user message kept in it."""
        out = self.san.out
        head: list[Message] = []
        if out and out[0].message.role == "system":
            head.append(out[0].message)
        fu = None
        if last is not None:
            if keep_first_user:
                fu_i = self._first_user()
                if fu_i is not None and fu_i < last.cut:
                    head.append(out[fu_i].message)
                    fu = fu_i
            head.append(last.message)
            head.extend(out[i].message for i in self._pinned_kept(last.cut, fu))
        return head, fu

    def _pinned_kept(self, cut: int, fu: int | None) -> list[int]:
        """Indices before the cut that stay verbatim after the summary: each pinned message's
        whole turn (the call and all its results), so the request stays valid."""
        if not self.pins:
            return []
        gs = self.ledger.group_starts
        kept: set[int] = set()
        for mid in self.pins:
            i = self._index_of(mid)
            if i is None or i >= cut or i == fu or i < self._base_start():
                continue
            k = bisect.bisect_right(gs, i) - 1
            start = gs[k] if k >= 0 else i
            end = gs[k + 1] if k + 1 < len(gs) else len(self.san.out)
            kept.update(j for j in range(start, min(end, cut)) if j != fu)
        return sorted(kept)

    def _tail_tokens(self, c: int, n: int) -> int:
        """Tokens of out[c:n] with every enabled stage applied: what is left after a cut at c."""
        top = max(self._stage_levels, default=0)
        return self._measure([], top, c, self._near_start(top, c, n), n)[0]

    def _choose_cut(self, start: int, n: int, head_tokens: int) -> int:
        p = self.policy
        gs = self.ledger.group_starts
        lo = bisect.bisect_right(gs, start)
        hi = bisect.bisect_left(gs, n)
        cands = gs[lo:hi]             # group starts strictly after the region start
        if not cands:
            return start
        last = cands[-1]
        if p.deep_cut == "last-boundary":   # seed 000 findSafeCutPoint
            out = self.san.out
            for i in range(n - 1, start, -1):
                m = out[i].message
                if m.role == "user":
                    return min(i, last)
                if m.role == "assistant" and not m.tool_calls:
                    return min(i + 1, last)
                if m.role == "assistant" and out[i - 1].message.role == "tool":
                    return i  # after all results of a call group: a single-prompt agent run compacts too
            return start
        head = self.calibration.scale(head_tokens)   # the tail's count carries the request's overhead

        def fits(c: int) -> bool:
            return head + self._tail_tokens(c, n) <= p.hard_limit

        if p.deep_cut == "keep-turns":       # seed 003: keep the last N turns, N = 20 -> 3
            for keep in range(p.shape_keep_last_max, p.shape_keep_last_min - 1, -1):
                if keep <= len(cands) and fits(cands[-keep]):
                    return cands[-keep]
            return cands[-min(p.shape_keep_last_min, len(cands))]
        budget = int(p.deep_keep_ratio * p.window)   # keep-tokens
        # the longest tail within the budget: the tail shrinks as the cut moves on, so a binary search
        lo, hi = 0, len(cands) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.calibration.scale(self.ledger.tokens(0, cands[mid], n)) <= budget:
                hi = mid
            else:
                lo = mid + 1
        k = lo
        while k < len(cands) - 1 and not fits(cands[k]):
            k += 1  # the kept tail must fit, or shaping would drop messages no summary covers
        return cands[k]

    def _last_turn_start(self, n: int) -> int:
        """Where the last turn of the history starts (0 when there is none)."""
        gs = self.ledger.group_starts
        k = bisect.bisect_left(gs, n) - 1
        return gs[k] if k >= 0 else 0

    def _settles(self, n: int) -> bool:
        """Whether a compaction now could bring the request under the soft limit: summarizing all but
        the last turn leaves the head (system, first user message, a summary) and that turn, with the
        request's overhead. When the part no summary removes is over the soft limit (an agent whose
        unseen prompt and tools take most of a small window), a compaction leaves the request near the
        hard limit and the next turn goes over it again: compacting each turn settles nothing."""
        start = self.active[-1].cut if self.active else self._base_start()
        gs = self.ledger.group_starts
        cands = gs[bisect.bisect_right(gs, start):bisect.bisect_left(gs, n)]
        if not cands:
            return True
        head, _ = self._head()
        tokens = sum(heuristic_message(m) for m in head) + EST_SUMMARY_TOKENS
        fu = self._first_user() if self.policy.keep_first_user and not self.active else None
        if fu is not None and start <= fu < cands[-1]:
            tokens += heuristic_message(self.san.out[fu].message)   # it stays beside the first summary
        return self.calibration.scale(tokens) + self._tail_tokens(cands[-1], n) <= self.policy.soft_limit

    def _batch_tokens(self, cut: int) -> int:
        """Tokens (at no stage) of the history a compaction up to `cut` would summarize."""
        start = self.active[-1].cut if self.active else self._base_start()
        return self.ledger.tokens(0, start, cut) if cut > start else 0

    def _deep_compact(self, trigger: str, base_tokens: int, cut: int | None = None) -> Compaction | None:
        out = self.san.out
        n = len(out)
        start = self.active[-1].cut if self.active else self._base_start()
        if cut is None:
            head, _ = self._head()
            cut = self._choose_cut(start, n, sum(heuristic_message(m) for m in head) + EST_SUMMARY_TOKENS)
        kept_first = self._first_user() if self.policy.keep_first_user else None
        if cut <= start or (cut - start == 1 and start == kept_first):
            return None   # nothing to summarize, or only the first user message, which stays verbatim
        previous = self.active[-1].comp.summary if self.active else None
        covered = [out[i].message for i in range(start, cut)]
        result = self.summarizer.summarize(covered, previous, self.policy)
        if not result.ok or not result.text:
            # history must not leave the context unsummarized: the offline summary stands in
            self._last_failure = result.reason or "empty summary"
            result = ExtractiveSummarizer().summarize(covered, previous, self.policy)
        comp = Compaction(id=f"c{self.turn:05d}-{self.compactions_applied + 1}",
                          cut_id=out[cut].sources[0] if cut < n else None, summary=result.text,
                          summarizer=result.summarizer, trigger=trigger, policy=self.policy.fingerprint(),
                          turn=self.turn + 1, tokens_before=base_tokens, covered=cut - start)
        self._apply(comp)
        return comp

    def _retract(self, comp: Compaction) -> None:
        """Take back a compaction decided in this plan, to replace it by one that covers more."""
        if self.active and self.active[-1].comp.id == comp.id:
            self.active.pop()
            self.compactions_applied -= 1
