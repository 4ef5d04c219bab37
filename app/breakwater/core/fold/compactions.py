"""The hard zone (SPEC §4, stage 5): the deep compactions in effect, deciding a new one, and the
head of a request after a summary ([System][First user][Summary][pinned turns]).

`DeepCompaction` holds the compactions applied, in order (the last one's cut is where the history
sent starts), whether one was applied or taken back since the last request was planned, and why
the summarizer's last summary was rejected. It reads the index (where a message is, the pins, the
turns) and counts with the meter.
"""

from __future__ import annotations

import bisect
from dataclasses import replace

from breakwater.core.fold.index import Index
from breakwater.core.fold.meter import Meter
from breakwater.core.fold.stage_forms import stage_levels
from breakwater.core.log.message import Message
from breakwater.core.log.tokens import heuristic_message
from breakwater.core.policy import Policy
from breakwater.core.stages.deep_compaction import EST_SUMMARY_TOKENS, Active, Compaction, choose_cut, follows
from breakwater.core.stages.extractive import ExtractiveSummarizer
from breakwater.core.stages.summarize import Summarizer, summary_message_text


class DeepCompaction:
    def __init__(self, policy: Policy, index: Index, meter: Meter, summarizer: Summarizer):
        self.policy = policy
        self.index = index
        self.meter = meter
        self.summarizer = summarizer
        self.active: list[Active] = []
        self.applied_count = 0                  # compactions applied so far (names the next one)
        self.just_compacted = False             # one was applied since the last request was planned
        self.just_undone = False                # the user took one back: do not redo it at once
        self.last_failure: str | None = None    # why the summarizer's last summary was rejected

    def copy(self, index: Index, meter: Meter) -> DeepCompaction:
        new = DeepCompaction.__new__(DeepCompaction)
        new.__dict__.update(vars(self), index=index, meter=meter, active=[replace(a) for a in self.active])
        return new

    def retune(self, policy: Policy) -> None:
        self.policy = policy

    def seen(self) -> None:
        """A request was planned knowing of the compactions applied or taken back so far."""
        self.just_compacted = self.just_undone = False

    def take_failure(self) -> str | None:
        """Why the summarizer's last summary was rejected, once (a plan notes it)."""
        failure, self.last_failure = self.last_failure, None
        return failure

    def cut(self) -> int:
        """First index of the history after the summary (or the system prompt)."""
        return self.active[-1].cut if self.active else self.index.base_start()

    def applied(self, compaction_id: str) -> bool:
        return any(a.comp.id == compaction_id for a in self.active)

    # -- the log's compactions, and the user's -------------------------------------------------------
    def apply(self, comp: Compaction) -> None:
        """Put `comp` in effect, unless the log does not hold the message it names, or it is applied."""
        placed = self.place(comp)
        if placed is not None:
            self.admit(placed)

    def admit(self, placed: Active) -> bool:
        """Apply `placed`, unless already applied (the caller fed back the event we returned) or out of order."""
        if not follows(self.active, placed):
            return False
        self.active.append(placed)
        self.applied_count += 1
        self.just_compacted = True
        return True

    def place(self, comp: Compaction) -> Active | None:
        """`comp` where it cuts the sanitized history; None when the log does not hold the message it
        names (ignored rather than guessed)."""
        out = self.index.san.out
        if comp.cut_id is None:
            # the summary covers everything so far: calls still waiting for results are closed
            # now, or stripping them later would leave the cut past the end
            self.index.san.close_group()
            cut = len(out)
        else:
            cut = self.index.index_of(comp.cut_id)
            if cut is None or cut >= len(out) or comp.cut_id not in out[cut].sources:
                return None
        msg = Message(id=f"summary:{comp.id}", role="user", content=summary_message_text(comp.summary),
                      turn=comp.turn, meta={"compaction": comp.id})
        return Active(comp, cut, msg)

    def undo(self, target: str) -> None:
        """The user took back compaction `target` (and so every one after it)."""
        for i, a in enumerate(self.active):
            if a.comp.id == target:
                del self.active[i:]
                self.just_compacted = False
                self.just_undone = True
                break

    def withdraw(self, compaction_id: str) -> None:
        """Take back a compaction just decided that was never logged: as if it had not been proposed."""
        for i, a in enumerate(self.active):
            if a.comp.id == compaction_id:
                self.applied_count -= len(self.active) - i
                del self.active[i:]
                self.just_compacted = False
                return
        raise KeyError(compaction_id)

    def replace_summary(self, compaction_id: str, summary: str) -> Compaction:
        """Swap the text of an applied compaction (a summary the user edited before it was sent)."""
        for a in self.active:
            if a.comp.id == compaction_id:
                a.comp = replace(a.comp, summary=summary)
                a.message = replace(a.message, content=summary_message_text(summary))
                self.just_compacted = True
                return a.comp
        raise KeyError(compaction_id)

    # -- the head of a request ------------------------------------------------------------------------
    def head(self) -> tuple[list[Message], int | None]:
        """The messages before the history sent, and the index of the first user message among them."""
        return self.head_after(self.active[-1] if self.active else None, self.policy.keep_first_user)

    def head_after(self, last: Active | None, keep_first_user: bool) -> tuple[list[Message], int | None]:
        """[System][First user][Summary][pinned turns] after the compaction `last` (the system prompt alone
        before any), and the index of the first user message kept in it."""
        out = self.index.san.out
        head: list[Message] = []
        if out and out[0].message.role == "system":
            head.append(out[0].message)
        fu = None
        if last is not None:
            if keep_first_user:
                fu_i = self.index.first_user()
                if fu_i is not None and fu_i < last.cut:
                    head.append(out[fu_i].message)
                    fu = fu_i
            head.extend(self.users_kept(last.cut, fu))
            head.append(last.message)
            head.extend(out[i].message for i in self.pinned_kept(last.cut, fu))
        return head, fu

    def users_kept(self, cut: int, fu: int | None) -> tuple[Message, ...]:
        """The user's own messages before the cut kept verbatim beside the summary, the newest first up
        to `deep_keep_user_tokens` (Codex's compacted history), in their order; none when that is 0.
        A scan back from the cut, made when a request's frame is worked out (core/fold/frames.py keeps it)."""
        budget = self.policy.deep_keep_user_tokens
        if not budget:
            return ()
        out, kept = self.index.san.out, []
        for i in range(min(cut, len(out)) - 1, -1, -1):
            m = out[i].message
            if m.role != "user" or m.is_observation or i == fu or (m.meta or {}).get("compaction"):
                continue
            cost = heuristic_message(m)
            if cost > budget:
                break   # Codex cuts the oldest one it keeps to what is left; it is left out here
            kept.append(m)
            budget -= cost
        return tuple(reversed(kept))

    def pinned_kept(self, cut: int, fu: int | None) -> list[int]:
        """Indices before the cut that stay verbatim after the summary: each pinned message's
        whole turn (the call and all its results), so the request stays valid."""
        index = self.index
        if not index.pins:
            return []
        gs = index.ledger.group_starts
        kept: set[int] = set()
        base_start = index.base_start()
        for mid in index.pins:
            i = index.index_of(mid)
            if i is None or i >= cut or i == fu or i < base_start:
                continue
            k = bisect.bisect_right(gs, i) - 1
            start = gs[k] if k >= 0 else i
            end = gs[k + 1] if k + 1 < len(gs) else len(index.san.out)
            kept.update(j for j in range(start, min(end, cut)) if j != fu)
        return sorted(kept)

    # -- a new compaction -----------------------------------------------------------------------------
    def compact(self, trigger: str, base_tokens: int, turn: int, cut: int | None = None) -> Compaction | None:
        """Summarize the history from the current cut to `cut` (by default where the policy cuts) and
        apply it, as the compaction of request `turn + 1`; None when there is nothing to summarize."""
        index = self.index
        out = index.san.out
        n = len(out)
        start = self.active[-1].cut if self.active else index.base_start()
        if cut is None:
            head, _ = self.head()
            cut = self._choose_cut(start, n, sum(heuristic_message(m) for m in head) + EST_SUMMARY_TOKENS)
        kept_first = index.first_user() if self.policy.keep_first_user else None
        if cut <= start or (cut - start == 1 and start == kept_first):
            return None   # nothing to summarize, or only the first user message, which stays verbatim
        previous = self.active[-1].comp.summary if self.active else None
        covered = [out[i].message for i in range(start, cut)]
        result = self.summarizer.summarize(covered, previous, self.policy)
        if not result.ok or not result.text:
            # history must not leave the context unsummarized: the offline summary stands in
            self.last_failure = result.reason or "empty summary"
            result = ExtractiveSummarizer().summarize(covered, previous, self.policy)
        comp = Compaction(id=f"c{turn:05d}-{self.applied_count + 1}",
                          cut_id=out[cut].sources[0] if cut < n else None, summary=result.text,
                          summarizer=result.summarizer, trigger=trigger, policy=self.policy.fingerprint(),
                          turn=turn + 1, tokens_before=base_tokens, covered=cut - start)
        self.apply(comp)
        return comp

    def retract(self, comp: Compaction) -> None:
        """Take back a compaction decided in this plan, to replace it by one that covers more."""
        if self.active and self.active[-1].comp.id == comp.id:
            self.active.pop()
            self.applied_count -= 1

    def settles(self, n: int) -> bool:
        """Whether a compaction now could bring the request under the soft limit: summarizing all but
        the last turn leaves the head (system, first user message, a summary) and that turn, with the
        request's overhead. When the part no summary removes is over the soft limit (an agent whose
        unseen prompt and tools take most of a small window), a compaction leaves the request near the
        hard limit and the next turn goes over it again: compacting each turn settles nothing."""
        index = self.index
        start = self.active[-1].cut if self.active else index.base_start()
        gs = index.ledger.group_starts
        cands = gs[bisect.bisect_right(gs, start):bisect.bisect_left(gs, n)]
        if not cands:
            return True
        head, _ = self.head()
        tokens = sum(heuristic_message(m) for m in head) + EST_SUMMARY_TOKENS
        fu = index.first_user() if self.policy.keep_first_user and not self.active else None
        if fu is not None and start <= fu < cands[-1]:
            tokens += heuristic_message(index.san.out[fu].message)   # it stays beside the first summary
        return self.meter.calibration.scale(tokens) + self._tail_tokens(cands[-1], n) <= self.policy.soft_limit

    def batch_tokens(self, cut: int) -> int:
        """Tokens (at no stage) of the history a compaction up to `cut` would summarize."""
        start = self.active[-1].cut if self.active else self.index.base_start()
        return self.index.ledger.tokens(0, start, cut) if cut > start else 0

    def last_turn_start(self, n: int) -> int:
        """Where the last turn of the history starts (0 when there is none)."""
        gs = self.index.ledger.group_starts
        k = bisect.bisect_left(gs, n) - 1
        return gs[k] if k >= 0 else 0

    def _tail_tokens(self, c: int, n: int) -> int:
        """Tokens of out[c:n] with every enabled stage applied: what is left after a cut at c."""
        top = max(stage_levels(self.policy), default=0)
        return self.meter.measure([], top, c, self.index.near_start(top, c, n), n)[0]

    def _choose_cut(self, start: int, n: int, head_tokens: int) -> int:
        gs = self.index.ledger.group_starts
        cands = gs[bisect.bisect_right(gs, start):bisect.bisect_left(gs, n)]   # turns after the region start
        p, scale, tokens = self.policy, self.meter.calibration.scale, self.index.ledger.tokens
        head = scale(head_tokens)   # the tail's count carries the request's overhead
        return choose_cut(p, self.index.san.out, cands, start, n,
                          lambda c: head + self._tail_tokens(c, n) <= p.hard_limit,
                          lambda c: scale(tokens(0, c, n)))
