"""The compaction pipeline (SPEC §4) as a fold over the session log.

`Pipeline` is fed the log's entries in order; before each request `plan()`
decides what to send and `materialize()` (core/materialize.py) builds the
messages and edits. The result depends only on (log, policy): deep compactions
it decides are returned as events that the caller appends to the log (the
agent) or keeps aside (simulation), and recorded events are re-applied on
replay, so a replay gives back exactly the same views.

Stages for every request:
  1 sanitize (incremental)      2 apply persisted summaries
  3 fast path                   4 soft zone: snip -> mask -> microcompact, until under soft
  5 hard zone: deep compact     6 shape history: keep-last 20 -> 3, then head/tail the largest

Per-message work is done once, when a message arrives: its token count at
every stage level is kept in prefix sums, so a request costs O(1) arithmetic
plus the few messages of working memory, not a pass over the history.
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field, replace
from typing import Iterable

from breakwater.core import mask as mask_stage
from breakwater.core import materialize as build
from breakwater.core import microcompact as micro_stage
from breakwater.core import snip as snip_stage
from breakwater.core.edits import View
from breakwater.core.ledger import NEAR, Ledger
from breakwater.core.message import Message, ToolCall
from breakwater.core.policy import Policy
from breakwater.core.sanitize import Sanitizer
from breakwater.core.session_log import Entry, Event
from breakwater.core.shape import join_users
from breakwater.core.summarize import ExtractiveSummarizer, Summarizer, summary_message_text
from breakwater.core.tokens import Calibration, TokenCounter, heuristic_message

LEVEL_NAMES = {0: "none", 1: "snip", 2: "mask", 3: "microcompact"}
STAGE_LEVEL = {"snip": 1, "mask": 2, "microcompact": 3}
EXACT_BAND_OVER_HARD = 1.25  # the heuristic can be ~20% off; beyond this it decides alone


UNCHANGED = (None, None, None, None)   # a message no stage level changes: its forms at levels 1-3, near

# The far forms of long messages, shared by every pipeline of the same policy (a re-simulation, the
# fidelity replays): (id(message), id(call), policy) -> (message, call, forms, their tokens). An entry
# holds the message and the call, so no other object takes their ids while it is there.
_FORMS: dict[tuple[int, int, int], tuple] = {}
_POLICY_IDS: dict[Policy, int] = {}   # a small number per policy seen: a key is hashed in a few operations
_NEXT_POLICY_ID = itertools.count()    # atomic: two threads meeting two new policies give them two numbers
CACHED_FORMS = 1 << 13
CACHED_FORMS_CHARS = 2_000   # shorter messages: their forms cost less than remembering them

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


@dataclass(slots=True)
class Plan:
    """The decision for one request; enough to count it, and to build it."""

    turn: int
    n: int
    cut: int
    start: int                # first sanitized index of the sent region (after shaping)
    level: int
    near_start: int
    keep_first_user: int | None
    head: list[Message]
    raw_tokens: int
    base_tokens: int
    sent_tokens: int
    zone: str
    counted: str
    fits: bool
    zone_counted: str = "estimate"   # whether the zone decision was confirmed by an exact count
    squeeze: bool = False
    new_compaction: Compaction | None = None
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    api_tokens: int | None = None
    built: View | None = None  # the request, when planning already had to build it (squeeze)
    # the soft zone applies `level` to the far messages before `boundary`, `lower` to the rest
    lower: int = 0
    boundary: int = 0
    drop_to: int = 0           # shape history dropped out[cut:drop_to] (none when equal to cut)
    joined: tuple[str, ...] = ()  # ids of user messages joined into the one before them
    stable_prefix_tokens: int | None = None  # estimate: the start of the request identical to the previous one
    sent_heuristic: int = 0    # the sent request by the plain heuristic: like for like with raw_tokens
    recorded_compaction: Compaction | None = None  # a compaction from the log applied right before it
    head_heuristic: int = 0    # heuristic tokens of `head`


@dataclass(slots=True)   # not frozen: a plan builds several, and frozen fields are set the slow way
class _Shape:
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


class Pipeline:
    def __init__(self, policy: Policy, counter: TokenCounter | None = None, mode: str = "exact",
                 summarizer: Summarizer | None = None):
        self.policy = policy
        self._policy_id = _POLICY_IDS.setdefault(policy, next(_NEXT_POLICY_ID))
        # asked for many times a request; the policy works them out each time
        self._soft_limit, self._hard_limit = policy.soft_limit, policy.hard_limit
        self._stage_levels = tuple(L for L, on in ((1, policy.snip), (2, policy.mask), (3, policy.microcompact)) if on)
        self.counter = counter or TokenCounter(None)
        self.mode = mode if self.counter.exact_available else "heuristic"
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.san = Sanitizer()
        self.calibration = Calibration()
        self.turn = 0
        self.raw_tokens = 0                    # heuristic tokens of every raw message so far
        self.ledger = Ledger()                 # per sanitized message
        self.calls: dict[str, ToolCall] = {}
        self.id_index: dict[str, int] = {}
        self._exact: dict[int, tuple[int, list[int]]] = {}  # level -> (base index, prefix sums)
        self._fresh: dict[int, int] = {}
        self._near_cache: dict[int, dict[int, tuple]] = {}   # index -> level -> (result, heuristic tokens)
        # events
        self.active: list[_Active] = []
        self.triggers: dict[str, int] = {}
        self.pins: set[str] = set()
        self.pin_events: dict[str, str] = {}   # pin event id -> message id, so an undo can name a pin
        self.api_tokens: int | None = None
        self.compactions_applied = 0
        self._compacted_since_view = False
        self._undone_since_view = False         # the user took a compaction back: do not redo it at once
        self._last_failure: str | None = None   # why the summarizer's last summary was rejected
        self._soft_boundary: dict[tuple[int, int, int], int] = {}  # (cut, level, lower) -> boundary kept
        self._previous: Plan | None = None      # the last request planned, for its cache-stable prefix
        self._changed_from = 0                  # lowest sanitized index changed since that request
        self._measured: dict[tuple, tuple] = {}   # one plan's counted request shapes
        self._joined: dict[tuple[int, ...], tuple] = {}   # parts of a joined head -> (parts, joined, absorbed)
        self._far_recent: dict[int, tuple] = {}   # far forms of the newest messages, at levels 1-3
        self._frames: dict[tuple[int, bool], tuple] = {}  # (start, start < n) -> (summary, pins, frame)
        self._frames_reach = -1                 # the highest start in _frames: a change past it keeps them all
        self._pins_version = 0
        self._fu: int | None = None             # index of the first user message, once found
        self._fu_scanned = 0                    # out[:_fu_scanned] holds no user message (when _fu is None)

    # -- feeding ---------------------------------------------------------------------------------
    def feed_all(self, entries: Iterable[Entry]) -> None:
        for e in entries:
            self.feed(e)

    def feed(self, entry: Entry) -> None:
        if not isinstance(entry, Message):
            self._feed_event(entry)
            return
        if entry.role == "assistant":
            self.turn += 1
            for c in entry.tool_calls:
                self.calls[c.id] = c
        t = heuristic_message(entry)
        self.raw_tokens += t
        self._fresh[id(entry)] = t  # the sanitized list mostly holds the same objects: count once
        self.san.feed(entry)

    def _feed_event(self, ev: Event) -> None:
        if ev.type == "compaction":
            comp = Compaction.from_event(ev)
            if comp.trigger != "auto" or comp.policy == self.policy.fingerprint():
                # the summary ends the open call group: a call still unanswered is stripped now, not
                # after the cut was measured (the cut would then point past the end)
                self.san.close_group()
                self._sync()
                self._apply(comp)
        elif ev.type == "trigger":
            level = STAGE_LEVEL.get(str(ev.get("stage")))
            if level:
                self.triggers[ev.id] = level
        elif ev.type == "undo":
            self._undo(str(ev.get("target")))
        elif ev.type in ("pin", "unpin"):
            mid = str(ev.get("message_id"))
            if ev.type == "pin":
                self.pin_events[ev.id] = mid
            self._set_pin(mid, ev.type == "pin")
        elif ev.type == "usage":
            prompt = ev.get("prompt_tokens")
            if isinstance(prompt, int):
                self.api_tokens = prompt
                est = ev.get("estimate")
                if isinstance(est, int):
                    self.calibration.observe(prompt, est)

    def applied(self, compaction_id: str) -> bool:
        """Whether a compaction of the log is in effect (one of another policy is not)."""
        return any(a.comp.id == compaction_id for a in self.active)

    def _set_pin(self, mid: str, pinned: bool) -> None:
        (self.pins.add if pinned else self.pins.discard)(mid)
        self._pins_version += 1
        self._sync()
        idx = self.id_index.get(mid)
        if idx is not None:
            self._recompute_from(idx)

    def _undo(self, target: str) -> None:
        self.triggers.pop(target, None)
        if target in self.pin_events:
            self._set_pin(self.pin_events.pop(target), False)
        for i, a in enumerate(self.active):
            if a.comp.id == target:
                del self.active[i:]
                self._compacted_since_view = False
                self._undone_since_view = True
                break

    def withdraw(self, compaction_id: str) -> None:
        """Take back a compaction this pipeline just decided that was never logged (the user
        cancelled its preview): the state is as if it had not been proposed."""
        for i, a in enumerate(self.active):
            if a.comp.id == compaction_id:
                self.compactions_applied -= len(self.active) - i
                del self.active[i:]
                self._compacted_since_view = False
                return
        raise KeyError(compaction_id)

    def replace_summary(self, compaction_id: str, summary: str) -> Compaction:
        """Swap the text of an applied compaction (a summary the user edited before it was sent);
        the next view is built with it, as replaying the edited compaction event would."""
        for a in self.active:
            if a.comp.id == compaction_id:
                a.comp = replace(a.comp, summary=summary)
                a.message = replace(a.message, content=summary_message_text(summary))
                self._compacted_since_view = True
                return a.comp
        raise KeyError(compaction_id)

    # -- per-message caches ------------------------------------------------------------------------
    def _sync(self) -> None:
        d = self.san.take_dirty()
        known = len(self.ledger.tok0)
        if d < known or known < len(self.san.out):
            self._recompute_from(min(d, known))
        self._fresh.clear()

    def _recompute_from(self, d: int) -> None:
        out = self.san.out
        ledger = self.ledger
        if d < self._changed_from:
            self._changed_from = d
        if d < len(ledger):   # messages changed, not only added: forget what was derived from them
            for i in range(d, len(ledger)):
                self._near_cache.pop(i, None)
                self._far_recent.pop(i, None)
            ledger.truncate(d)
            for L, (base, arr) in list(self._exact.items()):
                if d < base:
                    del self._exact[L]
                else:
                    del arr[d - base + 1:]
        if d <= self._frames_reach:
            self._frames = {k: v for k, v in self._frames.items() if k[0] < d}
            self._frames_reach = max((k[0] for k in self._frames), default=-1)
        if self._fu is not None and self._fu >= d:
            self._fu = None
        if d < self._fu_scanned:
            self._fu_scanned = d
        id_index, fresh, far_recent = self.id_index, self._fresh, self._far_recent
        pins = self.pins
        for i in range(d, len(out)):
            entry = out[i]
            msg = entry.message
            for sid in entry.sources:
                id_index[sid] = i
            t0 = fresh.get(id(msg))
            if t0 is None:
                t0 = heuristic_message(msg)
            role = msg.role
            ledger.add(t0, role != "tool")
            # the soft-zone stages change tool results and assistant text only (SPEC §4)
            if role == "user" or role == "system" or (pins and any(s in pins for s in entry.sources)):
                forms = UNCHANGED
            else:
                forms, changed = self._shared_forms(msg)
                if changed:
                    ledger.add_forms(i, t0, changed)
            if role == "tool" and msg.meta:
                src = msg.meta.get("source")
                if isinstance(src, dict) and src.get("dropped_lines"):
                    ledger.add_truncated(i)
            far_recent[i] = forms
        # only messages about to leave working memory are asked for their far form again
        if len(far_recent) > 8 * self.policy.working_memory_messages:
            horizon = len(out) - 4 * self.policy.working_memory_messages
            self._far_recent = {k: v for k, v in far_recent.items() if k >= horizon}

    def _shared_forms(self, msg: Message) -> tuple[tuple, tuple]:
        """`_far_forms(msg)` and, when level 3 changes it, `_form_tokens` of them, else ()."""
        call = self.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
        key = (id(msg), id(call), self._policy_id)
        hit = _FORMS.get(key)
        if hit is not None and hit[0] is msg and hit[1] is call:
            return hit[2], hit[3]
        forms = self._far_forms(msg)
        # level 3 changes whatever 1 and 2 do
        changed = tuple(self._form_tokens(forms)) if forms[2] is not None or forms[3] is not None else ()
        if len(msg.content) > CACHED_FORMS_CHARS:
            if len(_FORMS) >= CACHED_FORMS:
                _FORMS.clear()
            _FORMS[key] = (msg, call, forms, changed)
        return forms, changed

    @staticmethod
    def _form_tokens(forms) -> list[tuple[int, str, int]]:
        """(level, kind, heuristic tokens) of each form; a form shared by two levels is counted once."""
        changed = []
        last, tokens = None, 0
        for L, res in zip((1, 2, 3, NEAR), forms):
            if res is not None:
                if res is not last:
                    last, tokens = res, heuristic_message(res[0])
                changed.append((L, res[2], tokens))
        return changed

    def _pinned(self, i: int) -> bool:
        return bool(self.pins) and any(s in self.pins for s in self.san.out[i].sources)

    # -- stage transforms (the only place that decides what a message becomes) ----------------------
    def _far(self, msg: Message, level: int):
        p = self.policy
        if level >= 3 and p.microcompact:
            call = self.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
            res = micro_stage.microcompact(msg, call, p)
            if res:
                return res
        if level >= 2 and p.mask:
            res = mask_stage.mask_far(msg, p)
            if res:
                return res
        return self._snipped(msg, level)

    def _far_forms(self, msg: Message) -> tuple:
        """`_far(msg, level)` for levels 1, 2 and 3, then `_near(msg, 2)`, each stage run once."""
        p = self.policy
        snipped = self._snipped(msg, 1)
        masked = near = snipped
        if p.mask:
            masked = mask_stage.mask_far(msg, p) or snipped
            near = mask_stage.head_tail_near(msg, p) or snipped
        micro = masked
        if p.microcompact:
            call = self.calls.get(msg.tool_call_id or "") if msg.role == "tool" else None
            micro = micro_stage.microcompact(msg, call, p) or masked
        return snipped, masked, micro, near

    def _near(self, msg: Message, level: int):
        p = self.policy
        if level >= 2 and p.mask:
            res = mask_stage.head_tail_near(msg, p)
            if res:
                return res
        return self._snipped(msg, level)

    def _snipped(self, msg: Message, level: int):
        if level >= 1 and self.policy.snip:
            res = snip_stage.snip(msg, self.policy)
            if res:
                return res[0], res[1], "snipped"
        return None

    @staticmethod
    def _near_level(level: int) -> int:
        """The ledger level of working memory under stage `level`: from masking up, one form."""
        return NEAR if level >= 2 else level

    def _near_cached(self, i: int, level: int):
        """Working-memory transforms are asked for on every request; compute each once."""
        level = min(level, 2)   # every level from masking up treats working memory alike
        by_level = self._near_cache.get(i)
        if by_level is None:
            if len(self._near_cache) > 256:  # only the last few messages are ever near
                horizon = len(self.ledger) - 4 * self.policy.working_memory_messages
                self._near_cache = {k: v for k, v in self._near_cache.items() if k >= horizon}
            by_level = self._near_cache[i] = {}
        hit = by_level.get(level)
        if hit is None:
            res = self._transform(i, level, near=True)
            hit = by_level[level] = (res, heuristic_message(res[0]) if res else self.ledger.tok0[i])
        return hit

    def _transform(self, i: int, level: int, near: bool):
        if level == 0 or self._pinned(i):
            return None
        forms = self._far_recent.get(i)
        if forms is not None:
            return forms[3] if near and level >= 2 else forms[level - 1]
        msg = self.san.out[i].message
        return self._near(msg, level) if near else self._far(msg, level)

    # -- counting ---------------------------------------------------------------------------------
    def _exact_sum(self, level: int, a: int, b: int) -> int:
        if a >= b:
            return 0
        base, arr = self._exact.get(level, (a, [0]))
        if a < base:
            base, arr = a, [0]
        self._exact[level] = (base, arr)
        out = self.san.out
        while base + len(arr) - 1 < b:
            i = base + len(arr) - 1
            res = self._transform(i, level, near=False)
            arr.append(arr[-1] + self.counter.exact_message(res[0] if res else out[i].message))
        return arr[b - base] - arr[a - base]

    def _in_band(self, estimate: int) -> bool:
        p = self.policy
        return (self.mode == "exact" and p.precise_from <= estimate <= EXACT_BAND_OVER_HARD * self._hard_limit)

    def _measure(self, head: list[Message], level: int, start: int, near_start: int, n: int,
                 lower: int | None = None, boundary: int | None = None,
                 head_tokens: int | None = None) -> tuple[int, str, int]:
        """Tokens of head + out[start:n]: far messages before `boundary` at `level`, the rest of the far
        ones at `lower`; working memory (from near_start) at `level` when the stage is whole, else `lower`.
        Returns the count, whether it is exact, and the plain heuristic figure."""
        partial = boundary is not None and lower is not None and boundary < near_start
        if not partial:
            lower, boundary = level, near_start
        if self.mode != "exact":   # a few lookups: cheaper than remembering them
            return self._count_shape(head, level, start, near_start, n, lower, boundary, partial, head_tokens)
        # one plan asks for the same request shape several times (zone, stages, shaping): once each
        key = (id(head), level, start, near_start, n, lower, boundary)
        hit = self._measured.get(key)
        if hit is not None:
            return hit[0]
        result = self._count_shape(head, level, start, near_start, n, lower, boundary, partial, head_tokens)
        self._measured[key] = (result, head)   # the head is kept so its id stays unique for the plan
        return result

    def _count_shape(self, head, level, start, near_start, n, lower, boundary, partial, head_tokens):
        near_level = lower if partial else level
        tokens = self.ledger.tokens
        h = sum(heuristic_message(m) for m in head) if head_tokens is None else head_tokens
        # an empty part costs two bisections for nothing, and a request of a plan has one or two
        h += tokens(level, start, boundary) + tokens(lower, boundary, near_start) if partial \
            else tokens(level, start, near_start)
        if near_start < n:
            h += tokens(self._near_level(near_level), near_start, n)
        est = self.calibration.apply(h)
        if not self._in_band(est):
            return est, "estimate", h
        c = self.counter
        x = sum(c.exact_message(m) for m in head)
        x += self._exact_sum(level, start, boundary) + self._exact_sum(lower, boundary, near_start)
        for i in range(near_start, n):
            r = self._near_cached(i, near_level)[0]
            x += c.exact_message(r[0] if r else self.san.out[i].message)
        return x, "exact", h

    def _raw_tokens(self) -> int:
        """The whole log so far by the seed's heuristic, never calibrated: one rule, so it never shrinks."""
        return self.raw_tokens

    # -- summaries ---------------------------------------------------------------------------------
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
        out = self.san.out
        if comp.cut_id is None:
            # the summary covers everything so far: calls still waiting for results are closed
            # now, or stripping them later would leave the cut past the end
            self.san.close_group()
            cut = len(out)
        else:
            cut = self.id_index.get(comp.cut_id)
            if cut is None or cut >= len(out) or comp.cut_id not in out[cut].sources:
                return  # the log does not hold the message it names; ignore rather than guess
        if any(a.comp.id == comp.id for a in self.active) or (self.active and cut < self.active[-1].cut):
            return  # already applied (the caller fed back the event we returned), or out of order
        msg = Message(id=f"summary:{comp.id}", role="user", content=summary_message_text(comp.summary),
                      turn=comp.turn, meta={"compaction": comp.id})
        self.active.append(_Active(comp, cut, msg))
        self.compactions_applied += 1
        self._compacted_since_view = True

    def _head(self) -> tuple[list[Message], int | None]:
        out = self.san.out
        head: list[Message] = []
        if out and out[0].message.role == "system":
            head.append(out[0].message)
        fu = None
        if self.active:
            if self.policy.keep_first_user:
                fu_i = self._first_user()
                if fu_i is not None and fu_i < self.active[-1].cut:
                    head.append(out[fu_i].message)
                    fu = fu_i
            head.append(self.active[-1].message)
            head.extend(out[i].message for i in self._pinned_kept(self.active[-1].cut, fu))
        return head, fu

    def _pinned_kept(self, cut: int, fu: int | None) -> list[int]:
        """Indices before the cut that stay verbatim after the summary: each pinned message's
        whole turn (the call and all its results), so the request stays valid."""
        if not self.pins:
            return []
        gs = self.ledger.group_starts
        kept: set[int] = set()
        for mid in self.pins:
            i = self.id_index.get(mid)
            if i is None or i >= cut or i == fu or i < self._base_start():
                continue
            k = bisect.bisect_right(gs, i) - 1
            start = gs[k] if k >= 0 else i
            end = gs[k + 1] if k + 1 < len(gs) else len(self.san.out)
            kept.update(j for j in range(start, min(end, cut)) if j != fu)
        return sorted(kept)

    def _tail_tokens(self, c: int, n: int) -> int:
        """Tokens of out[c:n] with every enabled stage applied: what is left after a cut at c."""
        top = max(self._levels() or (0,))
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
        head = self.calibration.apply(head_tokens)

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
            if self.calibration.apply(self.ledger.tokens(0, cands[mid], n)) <= budget:
                hi = mid
            else:
                lo = mid + 1
        k = lo
        while k < len(cands) - 1 and not fits(cands[k]):
            k += 1  # the kept tail must fit, or shaping would drop messages no summary covers
        return cands[k]

    def _deep_compact(self, trigger: str, base_tokens: int, cut: int | None = None) -> Compaction | None:
        out = self.san.out
        n = len(out)
        start = self.active[-1].cut if self.active else self._base_start()
        if cut is None:
            head, _ = self._head()
            est_summary = 600
            cut = self._choose_cut(start, n, sum(heuristic_message(m) for m in head) + est_summary)
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

    def _near_start(self, level: int, start: int, n: int) -> int:
        """First index treated as working memory: only masking (level 2 and up) tells near from far."""
        return max(start, n - self.policy.working_memory_messages) if level >= 2 else n

    def _levels(self) -> tuple[int, ...]:
        return self._stage_levels

    # -- the decision --------------------------------------------------------------------------------
    def plan(self, force_deep: str | None = None) -> Plan:
        """Decide the next request. May perform (and return) a deep compaction."""
        self.san.close_group()
        self._sync()
        self._measured = {}
        p = self.policy
        n = len(self.san.out)
        if not (force_deep or self.triggers or self._compacted_since_view or self._undone_since_view):
            plan = self._plan_safe(n)
            if plan is not None:
                return self._finish(plan)
        notes: list[str] = []
        new_comp: Compaction | None = None
        raw_tokens = self._raw_tokens()
        trigger_level = max(self.triggers.values(), default=0)

        def base_of() -> tuple[int, str]:
            jh, js, _, _, head_h = self._frame(self._cut(), n)
            return self._measure(jh, 0, js, n, n, None, None, head_h)[:2]

        base, counted = base_of()
        over = base > self._hard_limit and n >= p.fast_path_min_messages
        if over and not force_deep and not p.deep_compact_first and self._levels():
            top = max(self._levels())
            jh, js, _, _, head_h = self._frame(self._cut(), n)
            over = self._measure(jh, top, js, self._near_start(top, js, n), n, None, None, head_h)[0] > self._hard_limit
        undone = self._undone_since_view
        if force_deep or (over and p.deep_compact and not self._compacted_since_view and not undone):
            new_comp = self._deep_compact(force_deep or "auto", base)
            if new_comp is None:
                notes.append("deep compaction found nothing to summarize")
        recorded = self.active[-1].comp if self._compacted_since_view and new_comp is None else None
        if self._compacted_since_view:
            # a compaction just happened (here, or recorded in the log right before this
            # request): the zone is the one that triggered it, the rest is decided after it
            base_reported = self.active[-1].comp.tokens_before or base
            base, counted = base_of()
        else:
            base_reported = base
        zone_counted = counted
        self._compacted_since_view = self._undone_since_view = False
        zone = "safe" if base_reported <= self._soft_limit else ("soft" if base_reported <= self._hard_limit else "hard")
        fast = base <= self._soft_limit or n < p.fast_path_min_messages

        shape = self._fit(n, trigger_level, fast)
        if shape.drop_to > shape.cut and p.deep_compact and not undone:
            # shaping would drop turns: they leave the context through a summary instead
            if new_comp is not None:
                self._retract(new_comp)
            new_comp = self._deep_compact(new_comp.trigger if new_comp else (force_deep or "auto"), base_reported,
                                          cut=shape.drop_to) or new_comp
            self._compacted_since_view = False
            shape = self._fit(n, trigger_level, fast)
        if new_comp is not None:
            new_comp = replace(new_comp, tokens_after=base_of()[0])
            self.active[-1].comp = new_comp
        if self._last_failure:
            notes.append(f"summary rejected ({self._last_failure}); the extractive summary stands in")
            self._last_failure = None
        if shape.drop_to > shape.cut:
            gs = self.ledger.group_starts
            kept = bisect.bisect_left(gs, n) - bisect.bisect_left(gs, shape.drop_to)
            notes.append(f"shape history kept the last {kept} turn{'' if kept == 1 else 's'}")
        plan = Plan(self.turn + 1, n, shape.cut, shape.start, shape.level, shape.near_start, shape.kept_fu, shape.head,
                    raw_tokens, base_reported, shape.sent, zone, shape.counted, shape.sent <= p.window, zone_counted,
                    shape.sent > self._hard_limit, new_comp, {}, notes, self.api_tokens, None, shape.lower,
                    shape.boundary, shape.drop_to, shape.joined, None, shape.heuristic, recorded,
                    shape.head_heuristic)
        return self._finish(plan)

    def _plan_safe(self, n: int) -> Plan | None:
        """The plan of a request under the soft limit with nothing pending (no trigger, no compaction
        just made or undone): what the general path decides then, in a few lookups. None otherwise."""
        p = self.policy
        cut = self._cut()
        jh, js, joined, kept_fu, head_h = self._frame(cut, n)
        prefix = self.ledger.prefix   # level 0: ledger.tokens is a difference of prefix sums
        h = head_h + prefix[n] - prefix[js]
        est = self.calibration.apply(h)
        if est > self._soft_limit or self._in_band(est):
            return None
        # positional: keyword arguments cost a dataclass of this size several times its construction
        plan = Plan(self.turn + 1, n, cut, js, 0, n, kept_fu, jh, self._raw_tokens(), est, est, "safe", "estimate",
                    est <= p.window, "estimate", False, None, {}, [], self.api_tokens, None, 0, n, cut, joined, None,
                    h, None, head_h)
        prev = self._previous
        if prev is not None and prev.head is jh and prev.start == js and prev.built is None \
                and not (prev.level or prev.lower):
            # the same head, nothing staged on either side: the request is the previous one up to
            # the first message changed or added since
            end = min(prev.n, n, self._changed_from)
            if end >= js:
                plan.stable_prefix_tokens = self.calibration.apply(head_h + prefix[end] - prefix[js])
        return plan

    def _finish(self, plan: Plan) -> Plan:
        plan.counts = build.counts(self, plan)
        if plan.squeeze:
            view = plan.built = self.materialize(plan)
            plan.sent_tokens, plan.counted, plan.fits = view.sent_tokens, view.counted, view.fits
            plan.counts = view.edit_counts()
            plan.sent_heuristic = sum(heuristic_message(m) for m in view.messages)
        if plan.stable_prefix_tokens is None:
            plan.stable_prefix_tokens = self._stable_prefix(plan)
        if plan.built is not None:
            plan.built = replace(plan.built, stable_prefix_tokens=plan.stable_prefix_tokens)
        self._previous, self._changed_from = plan, plan.n
        return plan

    # -- the cache-stable prefix (SPEC §7) --------------------------------------------------------------
    def _stable_prefix(self, plan: Plan) -> int:
        """Tokens at the start of this request identical to the previous request: what a provider's
        prompt cache can reuse. Worked out from the two plans, without building either request."""
        prev = self._previous
        if prev is None:
            return 0
        if prev.head is plan.head:
            k = len(plan.head)
        else:
            k = 0
            while k < len(prev.head) and k < len(plan.head) and prev.head[k] == plan.head[k]:
                k += 1
        end = plan.start
        if k == len(prev.head) == len(plan.head) and prev.start == plan.start:
            end = self._first_changed(prev, plan, plan.start, min(prev.n, plan.n, self._changed_from))
        count = k + (end - plan.start)
        for p_ in (prev, plan):  # a squeezed request differs from its plan from the first message squeezed on
            if p_.built is not None:
                changed = {e.message_id for e in p_.built.edits if e.stage == "shape_history" and e.kind == "snipped"}
                count = min(count, next((j for j, m in enumerate(p_.built.messages) if m.id in changed), count))
        if plan.built is not None:
            return self.calibration.apply(sum(heuristic_message(m) for m in plan.built.messages[:count]))
        if count >= len(plan.head):
            h = plan.head_heuristic
        else:
            h = sum(heuristic_message(m) for m in plan.head[:count])
        if count > len(plan.head):
            h += self._region_tokens(plan, plan.start, plan.start + count - len(plan.head))
        return self.calibration.apply(h)

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
                    r1, r2 = self._transform(i, level, True), self._transform(i, level, False)
                    if (r1[0].content if r1 else None) != (r2[0].content if r2 else None):
                        return i
            return end
        cuts = sorted({a, end} | {x for x in (prev.boundary, prev.near_start, plan.boundary, plan.near_start)
                                  if a < x < end})
        for x, y in zip(cuts, cuts[1:]):
            was, now = self._assigned(prev, x), self._assigned(plan, x)
            if was == now:
                continue
            # a message that neither level changes is sent alike: only the ones either changes are compared
            for i in self.ledger.changed_in(self._ledger_level(*was), self._ledger_level(*now), x, y):
                r1, r2 = self._transform(i, *was), self._transform(i, *now)
                if (r1[0].content if r1 else None) != (r2[0].content if r2 else None):
                    return i
        return end

    @staticmethod
    def _ledger_level(level: int, near: bool) -> int:
        return NEAR if near else level

    def _region_tokens(self, plan: Plan, a: int, b: int) -> int:
        """Heuristic tokens of out[a:b] (a < b) as this plan sends them: a part at a time, split where
        the stage level changes (the boundary, working memory)."""
        tokens, bd, ns = self.ledger.tokens, plan.boundary, plan.near_start
        total, x = 0, a
        for y in (min(bd, ns), max(bd, ns), b):
            if x < y <= b:
                level = (plan.level if bd >= ns else plan.lower) if x >= ns else (plan.level if x < bd else plan.lower)
                total += tokens(NEAR if x >= ns and level >= 2 else level, x, y)
                x = y
        return total

    def _cut(self) -> int:
        """First index of the history after the summary (or the system prompt)."""
        return self.active[-1].cut if self.active else self._base_start()

    def _frame(self, s: int, n: int) -> tuple:
        """(head, first sent index, ids joined, first user kept, heuristic tokens of the head) of a request
        whose history starts at s: the cut, or a later turn when shaping drops some. It depends only on
        out[:s + 1], the summary and the pins, so it is worked out once, not every request."""
        key = (s, s < n)
        summary = self.active[-1].message if self.active else None
        hit = self._frames.get(key)
        if hit is not None and hit[0] is summary and hit[1] == self._pins_version:
            return hit[2]
        head, kept_fu = self._head()
        cut = self._cut()
        fu_i = self._first_user() if self.policy.keep_first_user else None
        if s > cut and fu_i is not None and cut <= fu_i < s:
            head, kept_fu = head + [self.san.out[fu_i].message], fu_i
        jh, js, joined = self._seam(head, s, n)
        frame = (jh, js, joined, kept_fu, sum(heuristic_message(m) for m in jh))
        if len(self._frames) > 32:
            self._frames.clear()
            self._frames_reach = -1
        self._frames[key] = (summary, self._pins_version, frame)
        self._frames_reach = max(self._frames_reach, s)
        return frame

    def _seam(self, head: list[Message], start: int, n: int) -> tuple[list[Message], int, tuple[str, ...]]:
        """The head with user messages in a row joined, also with the first kept message, so turns alternate."""
        msgs = list(head)
        if start < n and self.san.out[start].message.role == "user" and msgs and msgs[-1].role == "user":
            msgs.append(self.san.out[start].message)
            start += 1
        if sum(1 for m in msgs if m.role == "user") < 2:
            return msgs, start, ()
        # the same parts give the same joined message: build it (and count it) once, not every request
        hit = self._joined.get(tuple(id(m) for m in msgs))
        if hit is not None and all(a is b for a, b in zip(hit[0], msgs)):
            return hit[1], start, hit[2]
        joined, absorbed = join_users(msgs)
        if len(self._joined) > 16:
            self._joined.clear()
        self._joined[tuple(id(m) for m in msgs)] = (msgs, joined, tuple(absorbed))
        return joined, start, tuple(absorbed)

    def _fit(self, n: int, level: int, fast: bool) -> "_Shape":
        """Soft zone then shape history: the cheapest request from the current cut that fits."""
        p = self.policy
        cut = self._cut()
        framed = self._frame(cut, n)
        shapes: dict[tuple, _Shape] = {}   # the search below asks for some shapes twice

        def at(lv: int, s: int, lower: int | None = None, boundary: int | None = None) -> _Shape:
            key = (lv, s, lower, boundary)
            shape = shapes.get(key)
            if shape is not None:
                return shape
            jh, js, joined, kept_fu, head_h = framed if s == cut else self._frame(s, n)
            ns = self._near_start(lv, js, n)
            if boundary is not None:
                boundary = max(js, min(boundary, ns))
            t, how, h = self._measure(jh, lv, js, ns, n, lower, boundary, head_h)
            partial = boundary is not None and lower is not None and boundary < ns
            shape = shapes[key] = _Shape(jh, cut, js, s, lv, lower if partial else lv, boundary if partial else ns,
                                         ns, t, how, kept_fu, joined, h, head_h)
            return shape

        shape = at(level, cut)
        higher = [lv for lv in self._levels() if lv > level] if not fast or level else []
        if higher and shape.sent > self._soft_limit and not self.ledger.changes(higher, shape.start, n):
            # no stage above `level` changes a message sent (a long chat of short messages): each sends
            # this same request, over the soft limit, so the search below would end at the highest
            shape = at(higher[-1], cut)
        elif not fast or level:
            below = level
            for lv in self._levels():
                if shape.sent <= self._soft_limit:
                    break
                if lv <= level:
                    continue
                whole = at(lv, cut)
                if whole.sent <= self._soft_limit:
                    shape = self._oldest_first(at, lv, below, cut, whole)
                    break
                shape, below = whole, lv

        if shape.sent > self._hard_limit:
            # 6. shape history: the request must fit; keep [System][First user][Summary][Last N turns]
            gs = self.ledger.group_starts
            cands = gs[bisect.bisect_right(gs, cut):bisect.bisect_left(gs, n)]
            for keep in range(p.shape_keep_last_max, p.shape_keep_last_min - 1, -1):
                if keep > len(cands):
                    continue
                shape = at(shape.level, cands[-keep])
                if shape.sent <= self._hard_limit:
                    break
        return shape

    def _oldest_first(self, at, lv: int, below: int, cut: int, whole: "_Shape") -> "_Shape":
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
        if at(lv, cut, below, hi).sent > self._soft_limit:
            return whole  # even every far message is not enough: the stage applies to working memory too
        goal = self._soft_limit - int(p.soft_hysteresis_ratio * self._soft_limit)
        if at(lv, cut, below, hi).sent > goal:
            goal = self._soft_limit
        while lo < hi:
            mid = (lo + hi) // 2
            if at(lv, cut, below, mid).sent <= goal:
                hi = mid
            else:
                lo = mid + 1
        self._soft_boundary = {key: lo}
        return at(lv, cut, below, lo)

    # -- building the request (core/materialize.py) ---------------------------------------------------
    def materialize(self, plan: Plan) -> View:
        """The messages to send and every edit behind them."""
        return build.materialize(self, plan)

    def count(self, msgs: list[Message]) -> tuple[int, str]:
        """Tokens of a message list as this pipeline counts: calibrated estimate, exact near the limits."""
        h = self.calibration.apply(sum(heuristic_message(m) for m in msgs))
        if self._in_band(h):
            return self.counter.exact_messages(msgs), "exact"
        return h, "estimate"

    def view(self, force_deep: str | None = None) -> tuple[View, Compaction | None]:
        plan = self.plan(force_deep)
        return plan.built or self.materialize(plan), plan.new_compaction

    # -- checkpoints (the replay keeps many; folding from one must not disturb it) ----------------------
    def snapshot(self) -> "Pipeline":
        """An independent copy of this state, cheap enough to take every few turns: every container
        is copied one level deep (two where it holds mutable ones); messages, edits, plans' parts and
        other values never changed in place are shared, and so are the policy, the summarizer and the
        counter (its cache maps text to a count, the same for every copy)."""
        new = Pipeline.__new__(Pipeline)
        new.__dict__.update(
            policy=self.policy, counter=self.counter, mode=self.mode, summarizer=self.summarizer,
            san=self.san.snapshot(), calibration=replace(self.calibration), turn=self.turn,
            raw_tokens=self.raw_tokens, ledger=self.ledger.copy(), calls=self.calls.copy(),
            id_index=self.id_index.copy(), _exact={L: (base, arr.copy()) for L, (base, arr) in self._exact.items()},
            _fresh=self._fresh.copy(), _near_cache={i: by.copy() for i, by in self._near_cache.items()},
            active=[replace(a) for a in self.active], triggers=self.triggers.copy(), pins=self.pins.copy(),
            pin_events=self.pin_events.copy(), api_tokens=self.api_tokens,
            compactions_applied=self.compactions_applied, _compacted_since_view=self._compacted_since_view,
            _undone_since_view=self._undone_since_view, _last_failure=self._last_failure,
            _soft_boundary=self._soft_boundary.copy(),
            _previous=replace(self._previous) if self._previous is not None else None,
            _changed_from=self._changed_from, _measured=self._measured.copy(),
            _joined=self._joined.copy(), _far_recent=self._far_recent.copy(), _frames=self._frames.copy(),
            _frames_reach=self._frames_reach, _pins_version=self._pins_version, _fu=self._fu,
            _fu_scanned=self._fu_scanned,
            _soft_limit=self._soft_limit, _hard_limit=self._hard_limit, _stage_levels=self._stage_levels,
            _policy_id=self._policy_id)
        return new
