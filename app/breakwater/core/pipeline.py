"""The compaction pipeline (SPEC §4) as a fold over the session log.

`Pipeline` is fed the log's entries in order; before each request `plan()`
decides what to send and `materialize()` builds the messages and edits. The
result depends only on (log, policy): deep compactions it decides are returned
as events that the caller appends to the log (the agent) or keeps aside
(simulation), and recorded events are re-applied on replay, so a replay gives
back exactly the same views.

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
from dataclasses import dataclass, field, replace
from typing import Iterable

from breakwater.core import mask as mask_stage
from breakwater.core import microcompact as micro_stage
from breakwater.core import snip as snip_stage
from breakwater.core.edits import Edit, View
from breakwater.core.message import Message, ToolCall
from breakwater.core.policy import Policy
from breakwater.core.sanitize import Sanitizer
from breakwater.core.session_log import Entry, Event
from breakwater.core.summarize import ExtractiveSummarizer, Summarizer, summary_message_text
from breakwater.core.tokens import Calibration, TokenCounter, heuristic_message

LEVEL_NAMES = {0: "none", 1: "snip", 2: "mask", 3: "microcompact"}
STAGE_LEVEL = {"snip": 1, "mask": 2, "microcompact": 3}
FAR_KINDS = ("snipped", "masked", "folded", "microcompacted")
EXACT_BAND_OVER_HARD = 1.25  # the heuristic can be ~20% off; beyond this it decides alone


@dataclass(frozen=True, slots=True)
class Compaction:
    """A deep compaction: the messages before `cut_id` are replaced by `summary`."""

    id: str
    cut_id: str | None        # first message kept after the summary (None: nothing after it)
    summary: str
    summarizer: str
    trigger: str              # auto | manual | context_length
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


class Pipeline:
    def __init__(self, policy: Policy, counter: TokenCounter | None = None, mode: str = "exact",
                 summarizer: Summarizer | None = None):
        self.policy = policy
        self.counter = counter or TokenCounter(None)
        self.mode = mode if self.counter.exact_available else "heuristic"
        self.summarizer: Summarizer = summarizer or ExtractiveSummarizer()
        self.san = Sanitizer()
        self.calibration = Calibration()
        self.turn = 0
        self.raw: list[Message] = []
        self.raw_h = [0]                       # prefix sums of heuristic tokens of raw messages
        self._raw_exact = [0]
        # per sanitized message
        self.tok0: list[int] = []
        self.P: dict[int, list[int]] = {L: [0] for L in range(4)}
        self.KP: dict[tuple[int, str], list[int]] = {(L, k): [0] for L in range(1, 4) for k in FAR_KINDS}
        self.srcP = [0]                        # prefix count of results truncated at the source
        self.group_starts: list[int] = []
        self.calls: dict[str, ToolCall] = {}
        self.id_index: dict[str, int] = {}
        self._exact: dict[int, tuple[int, list[int]]] = {}  # level -> (base index, prefix sums)
        self._fresh: dict[int, int] = {}
        self._near_cache: dict[int, dict[int, tuple]] = {}   # index -> level -> (result, heuristic tokens)
        # events
        self.active: list[_Active] = []
        self.triggers: dict[str, int] = {}
        self.pins: set[str] = set()
        self.api_tokens: int | None = None
        self.compactions_applied = 0
        self._compacted_since_view = False
        self._undone_since_view = False         # the user took a compaction back: do not redo it at once
        self._last_failure: str | None = None   # why the last deep compaction produced no summary

    # -- feeding ---------------------------------------------------------------------------------
    def feed_all(self, entries: Iterable[Entry]) -> None:
        for e in entries:
            self.feed(e)

    def feed(self, entry: Entry) -> None:
        if isinstance(entry, Message):
            self._feed_message(entry)
        else:
            self._feed_event(entry)

    def _feed_message(self, msg: Message) -> None:
        if msg.role == "assistant":
            self.turn += 1
            for c in msg.tool_calls:
                self.calls[c.id] = c
        self.raw.append(msg)
        t = heuristic_message(msg)
        self.raw_h.append(self.raw_h[-1] + t)
        self._fresh[id(msg)] = t  # the sanitized list mostly holds the same objects: count once
        self.san.feed(msg)

    def _feed_event(self, ev: Event) -> None:
        if ev.type == "compaction":
            comp = Compaction.from_event(ev)
            if comp.trigger != "auto" or comp.policy == self.policy.fingerprint():
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
            (self.pins.add if ev.type == "pin" else self.pins.discard)(mid)
            self._sync()
            idx = self.id_index.get(mid)
            if idx is not None:
                self._recompute_from(idx)
        elif ev.type == "usage":
            prompt = ev.get("prompt_tokens")
            if isinstance(prompt, int):
                self.api_tokens = prompt
                est = ev.get("estimate")
                if isinstance(est, int):
                    self.calibration.observe(prompt, est)

    def _undo(self, target: str) -> None:
        self.triggers.pop(target, None)
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
        if d < len(self.tok0) or len(self.tok0) < len(self.san.out):
            self._recompute_from(min(d, len(self.tok0)))
        self._fresh.clear()

    def _recompute_from(self, d: int) -> None:
        out = self.san.out
        for i in range(d, len(self.tok0)):
            self._near_cache.pop(i, None)
        del self.tok0[d:]
        for L in range(4):
            del self.P[L][d + 1:]
        for key in self.KP:
            del self.KP[key][d + 1:]
        del self.srcP[d + 1:]
        cut_g = bisect.bisect_left(self.group_starts, d)
        del self.group_starts[cut_g:]
        for L, (base, arr) in list(self._exact.items()):
            if d < base:
                del self._exact[L]
            else:
                del arr[d - base + 1:]
        for i in range(d, len(out)):
            entry = out[i]
            msg = entry.message
            for sid in entry.sources:
                self.id_index[sid] = i
            if msg.role != "tool":
                self.group_starts.append(i)
            t0 = self._fresh.get(id(msg))
            if t0 is None:
                t0 = heuristic_message(msg)
            self.tok0.append(t0)
            self.P[0].append(self.P[0][-1] + t0)
            pinned = self._pinned(i)
            for L in range(1, 4):
                res = None if pinned else self._far(msg, L)
                kind = res[2] if res else None
                self.P[L].append(self.P[L][-1] + (heuristic_message(res[0]) if res else t0))
                for k in FAR_KINDS:
                    arr = self.KP[(L, k)]
                    arr.append(arr[-1] + (1 if kind == k else 0))
            src = (msg.meta or {}).get("source") if msg.role == "tool" and msg.meta else None
            self.srcP.append(self.srcP[-1] + (1 if isinstance(src, dict) and src.get("dropped_lines") else 0))

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

    def _near_cached(self, i: int, level: int):
        """Working-memory transforms are asked for on every request; compute each once."""
        by_level = self._near_cache.get(i)
        if by_level is None:
            if len(self._near_cache) > 256:  # only the last few messages are ever near
                horizon = len(self.tok0) - 4 * self.policy.working_memory_messages
                self._near_cache = {k: v for k, v in self._near_cache.items() if k >= horizon}
            by_level = self._near_cache[i] = {}
        hit = by_level.get(level)
        if hit is None:
            res = self._transform(i, level, near=True)
            hit = by_level[level] = (res, heuristic_message(res[0]) if res else self.tok0[i])
        return hit

    def _transform(self, i: int, level: int, near: bool):
        if level == 0 or self._pinned(i):
            return None
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
        return (self.mode == "exact" and p.precise_from <= estimate <= EXACT_BAND_OVER_HARD * p.hard_limit)

    def _measure(self, head: list[Message], level: int, start: int, near_start: int, n: int,
                 extra: list[int] = ()) -> tuple[int, str]:
        """Tokens of head + extra indices + out[start:n] at `level` (working memory from near_start)."""
        h = sum(heuristic_message(m) for m in head)
        h += sum(self.P[level][i + 1] - self.P[level][i] for i in extra)
        h += self.P[level][near_start] - self.P[level][start]
        near = [self._near_cached(i, level) for i in range(near_start, n)]
        h += sum(t for _, t in near)
        near = [r for r, _ in near]
        est = self.calibration.apply(h)
        if not self._in_band(est):
            return est, "estimate"
        c = self.counter
        x = sum(c.exact_message(m) for m in head)
        x += sum(self._exact_sum(level, i, i + 1) for i in extra)
        x += self._exact_sum(level, start, near_start)
        x += sum(c.exact_message(r[0] if r else self.san.out[i].message)
                 for i, r in zip(range(near_start, n), near))
        return x, "exact"

    def _raw_tokens(self) -> int:
        est = self.calibration.apply(self.raw_h[-1])
        if not self._in_band(est):
            return est
        while len(self._raw_exact) <= len(self.raw):
            self._raw_exact.append(self._raw_exact[-1] + self.counter.exact_message(self.raw[len(self._raw_exact) - 1]))
        return self._raw_exact[len(self.raw)]

    # -- summaries ---------------------------------------------------------------------------------
    def _base_start(self) -> int:
        out = self.san.out
        return 1 if out and out[0].message.role == "system" else 0

    def _first_user(self) -> int | None:
        for i, e in enumerate(self.san.out):
            if e.message.role == "user":
                return i
        return None

    def _apply(self, comp: Compaction) -> None:
        out = self.san.out
        if comp.cut_id is None:
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
        gs = self.group_starts
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

    def _choose_cut(self, start: int, n: int, head_tokens: int) -> int:
        p = self.policy
        gs = self.group_starts
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
            return start
        if p.deep_cut == "keep-turns":       # seed 003: keep the last N turns, N = 20 -> 3
            top = self.P[max(self._levels() or [0])]
            for keep in range(p.shape_keep_last_max, p.shape_keep_last_min - 1, -1):
                if keep > len(cands):
                    continue
                c = cands[-keep]
                if head_tokens + top[n] - top[c] <= p.hard_limit:
                    return c
            return cands[-min(p.shape_keep_last_min, len(cands))]
        budget = int(p.deep_keep_ratio * p.window)   # keep-tokens
        c = last
        for g in reversed(cands):
            if self.P[0][n] - self.P[0][g] > budget:
                break
            c = g
        return c

    def _deep_compact(self, trigger: str, base_tokens: int) -> Compaction | None:
        out = self.san.out
        n = len(out)
        start = self.active[-1].cut if self.active else self._base_start()
        head, _ = self._head()
        est_summary = 600
        cut = self._choose_cut(start, n, sum(heuristic_message(m) for m in head) + est_summary)
        if cut <= start:
            return None
        previous = self.active[-1].comp.summary if self.active else None
        covered = [out[i].message for i in range(start, cut)]
        result = self.summarizer.summarize(covered, previous, self.policy)
        if not result.ok or not result.text:
            self._last_failure = result.reason
            return None
        comp = Compaction(id=f"c{self.turn:05d}-{self.compactions_applied + 1}",
                          cut_id=out[cut].sources[0] if cut < n else None, summary=result.text,
                          summarizer=result.summarizer, trigger=trigger, policy=self.policy.fingerprint(),
                          turn=self.turn + 1, tokens_before=base_tokens, covered=cut - start)
        self._apply(comp)
        return comp

    def _near_start(self, level: int, start: int, n: int) -> int:
        """First index treated as working memory: only masking (level 2 and up) tells near from far."""
        return max(start, n - self.policy.working_memory_messages) if level >= 2 else n

    def _levels(self) -> list[int]:
        p = self.policy
        return [L for L, on in ((1, p.snip), (2, p.mask), (3, p.microcompact)) if on]

    # -- the decision --------------------------------------------------------------------------------
    def plan(self, force_deep: str | None = None) -> Plan:
        """Decide the next request. May perform (and return) a deep compaction."""
        self.san.close_group()
        self._sync()
        p = self.policy
        notes: list[str] = []
        new_comp: Compaction | None = None
        out = self.san.out
        n = len(out)
        raw_tokens = self._raw_tokens()

        head, fu = self._head()
        cut = self.active[-1].cut if self.active else self._base_start()
        base, counted = self._measure(head, 0, cut, n, n)
        level = max(self.triggers.values(), default=0)
        over = base > p.hard_limit and n >= p.fast_path_min_messages
        if over and not force_deep and not p.deep_compact_first and self._levels():
            top = max(self._levels())
            cheapest, _ = self._measure(head, top, cut, self._near_start(top, cut, n), n)
            over = cheapest > p.hard_limit
        if force_deep or (over and p.deep_compact and not self._compacted_since_view
                          and not self._undone_since_view):
            new_comp = self._deep_compact(force_deep or "auto", base)
            if new_comp is None:
                failure = self._last_failure
                notes.append(f"summary rejected ({failure}); falling back to masking" if failure
                             else "deep compaction found nothing to summarize")
                self._last_failure = None
        if self._compacted_since_view:
            # a compaction just happened (here, or recorded in the log right before this
            # request): the zone is the one that triggered it, the rest is decided after it
            base_reported = self.active[-1].comp.tokens_before or base
            head, fu = self._head()
            cut = self.active[-1].cut
            base, counted = self._measure(head, 0, cut, n, n)
            if new_comp is not None:
                new_comp = replace(new_comp, tokens_after=base)
                self.active[-1].comp = new_comp
        else:
            base_reported = base
        zone_counted = counted
        self._compacted_since_view = self._undone_since_view = False
        zone = "safe" if base_reported <= p.soft_limit else ("soft" if base_reported <= p.hard_limit else "hard")
        fast = base <= p.soft_limit or n < p.fast_path_min_messages

        def measure(lv: int, start: int, extra: list[int]) -> tuple[int, str, int]:
            ns = self._near_start(lv, start, n)
            t, how = self._measure(head, lv, start, ns, n, extra)
            return t, how, ns

        sent, counted, near_start = measure(level, cut, [])
        if not fast or level:
            for lv in self._levels():
                if sent <= p.soft_limit:
                    break
                if lv <= level:
                    continue
                level = lv
                sent, counted, near_start = measure(level, cut, [])

        # 6. shape history: the request must fit; keep [System][First user][Summary][Last N turns]
        start, extra_fu = cut, None
        target = p.hard_limit
        if sent > target:
            fu_i = self._first_user() if p.keep_first_user else None
            lo = bisect.bisect_right(self.group_starts, cut)
            cands = self.group_starts[lo:bisect.bisect_left(self.group_starts, n)]
            best = None
            for keep in range(p.shape_keep_last_max, p.shape_keep_last_min - 1, -1):
                if keep > len(cands):
                    continue
                s = cands[-keep]
                extra = [fu_i] if fu_i is not None and cut <= fu_i < s else []
                t, how, ns = measure(level, s, extra)
                best = (s, extra, t, how, ns)
                if t <= target:
                    break
            if best is not None:
                start, extra, sent, counted, near_start = best
                extra_fu = extra[0] if extra else None
                notes.append(f"shape history kept the last {len([g for g in cands if g >= start])} turns")

        plan = Plan(turn=self.turn + 1, n=n, cut=cut, start=start, level=level, near_start=near_start,
                    keep_first_user=extra_fu if extra_fu is not None else fu, head=head,
                    raw_tokens=raw_tokens, base_tokens=base_reported, sent_tokens=sent, zone=zone, counted=counted,
                    fits=sent <= p.window, zone_counted=zone_counted, squeeze=sent > target,
                    new_compaction=new_comp, notes=notes, api_tokens=self.api_tokens)
        plan.counts = self._counts(plan, extra_fu)
        if plan.squeeze:
            view = plan.built = self.materialize(plan)
            plan.sent_tokens, plan.counted, plan.fits = view.sent_tokens, view.counted, view.fits
            plan.counts = view.edit_counts()
        return plan

    def _counts(self, plan: Plan, extra_fu: int | None) -> dict[str, int]:
        counts = dict(self.san.counts)
        if self.active:
            covered = plan.cut - self._base_start()
            if plan.keep_first_user is not None and plan.keep_first_user < plan.cut:
                covered -= 1
            covered -= len(self._pinned_kept(plan.cut, plan.keep_first_user if plan.keep_first_user is not None
                                             and plan.keep_first_user < plan.cut else None))
            counts["summarized"] = counts.get("summarized", 0) + max(0, covered)
        dropped = plan.start - plan.cut - (1 if extra_fu is not None else 0)
        if dropped > 0:
            counts["dropped"] = counts.get("dropped", 0) + dropped
        if plan.level:
            for k in FAR_KINDS:
                arr = self.KP[(plan.level, k)]
                c = arr[plan.near_start] - arr[plan.start]
                if c:
                    counts[k] = counts.get(k, 0) + c
            for i in range(plan.near_start, plan.n):
                res = self._transform(i, plan.level, near=True)
                if res:
                    counts[res[2]] = counts.get(res[2], 0) + 1
        src = self.srcP[plan.n] - self.srcP[plan.start]
        if src:
            counts["truncated-at-source"] = src
        return {k: v for k, v in counts.items() if v}

    # -- building the request -------------------------------------------------------------------------
    def materialize(self, plan: Plan) -> View:
        """The messages to send and every edit behind them."""
        p = self.policy
        out = self.san.out
        msgs: list[Message] = list(plan.head)
        edits: list[Edit] = list(self.san.edits)
        base_start = self._base_start()
        if self.active:
            kept_fu = plan.keep_first_user if plan.keep_first_user is not None and plan.keep_first_user < plan.cut else None
            pinned = set(self._pinned_kept(plan.cut, kept_fu))
            why = f"hard limit {p.hard_limit}"
            tok0 = self.tok0
            for i in range(base_start, plan.cut):
                if i == kept_fu or i in pinned:
                    continue
                m = out[i].message
                edits.append(Edit(m.id, "deep_compact", "summarized", ((0, len(m.content)),), tok0[i], 0, why))
        indices = list(range(plan.start, plan.n))
        if plan.keep_first_user is not None and plan.cut <= plan.keep_first_user < plan.start:
            indices.insert(0, plan.keep_first_user)
        why = f"keep last turns to fit {p.hard_limit}"
        for i in range(plan.cut, plan.start):
            if i != plan.keep_first_user:
                m = out[i].message
                edits.append(Edit(m.id, "shape_history", "dropped", ((0, len(m.content)),), self.tok0[i], 0, why))
        for i in indices:
            m = out[i].message
            near = i >= plan.near_start
            res = self._transform(i, plan.level, near) if plan.level else None
            src = (m.meta or {}).get("source") if m.role == "tool" and m.meta else None
            if isinstance(src, dict) and src.get("dropped_lines"):
                edits.append(Edit(m.id, "source", "truncated-at-source", (),
                                  int(src.get("total_bytes", 0)) // 4, heuristic_message(m),
                                  f"tool output over {src.get('max_lines', p.tool_max_lines)} lines"))
            if res:
                new, spans, kind = res
                stage = {"snipped": "snip" if not near or plan.level < 2 else "working_memory",
                         "masked": "mask", "folded": "mask" if plan.level < 3 else "microcompact",
                         "microcompacted": "microcompact"}[kind]
                edits.append(Edit(m.id, stage, kind, spans, heuristic_message(m), heuristic_message(new),
                                  self._threshold(kind, near)))
                msgs.append(new)
            else:
                msgs.append(m)
        if plan.squeeze:
            msgs, more = squeeze(msgs, p, lambda ms: self.count(ms)[0])
            edits.extend(more)
        sent, counted = self.count(msgs)
        return View(turn=plan.turn, messages=tuple(msgs), edits=tuple(edits), raw_tokens=plan.raw_tokens,
                    base_tokens=plan.base_tokens, sent_tokens=sent, zone=plan.zone, counted=counted,
                    window=p.window, soft_limit=p.soft_limit, hard_limit=p.hard_limit,
                    api_tokens=plan.api_tokens, fits=sent <= p.window, notes=tuple(plan.notes))

    def count(self, msgs: list[Message]) -> tuple[int, str]:
        """Tokens of a message list as this pipeline counts: calibrated estimate, exact near the limits."""
        h = self.calibration.apply(sum(heuristic_message(m) for m in msgs))
        if self._in_band(h):
            return self.counter.exact_messages(msgs), "exact"
        return h, "estimate"

    def _threshold(self, kind: str, near: bool) -> str:
        p = self.policy
        if kind == "snipped" and near and p.mask:
            return f"working memory: tool output > {p.working_memory_max_chars} chars"
        return {"snipped": f"soft limit {p.soft_limit}; tool output > {p.snip_threshold_chars} chars",
                "masked": f"soft limit {p.soft_limit}; outside last {p.working_memory_messages} messages, "
                          f"tool output > {p.mask_min_chars} chars",
                "folded": f"soft limit {p.soft_limit}; outside last {p.working_memory_messages} messages, "
                          f"assistant text > {p.fold_min_chars} chars",
                "microcompacted": f"soft limit {p.soft_limit}; outside last {p.working_memory_messages} messages",
                }[kind]

    def view(self, force_deep: str | None = None) -> tuple[View, Compaction | None]:
        plan = self.plan(force_deep)
        return plan.built or self.materialize(plan), plan.new_compaction


def squeeze(msgs: list[Message], policy: Policy, count) -> tuple[list[Message], list[Edit]]:
    """Last resort: head/tail the largest messages until the request fits under the hard limit.

    Never touches the system prompt or tool calls; user messages keep their first
    `user_keep_chars` characters unless nothing else is left to cut.
    """
    msgs = list(msgs)
    edits: list[Edit] = []
    target = policy.hard_limit
    total = count(msgs)
    for allow_user in (False, True):
        while total > target:
            best, best_room = None, 0
            for i, m in enumerate(msgs):
                if m.role == "system" or (m.role == "user" and not allow_user):
                    continue
                floor = policy.user_keep_chars if m.role == "user" else 200
                room = len(m.content) - floor
                if room > best_room and room > 64:
                    best, best_room = i, room
            if best is None:
                break
            m = msgs[best]
            floor = policy.user_keep_chars if m.role == "user" else 200
            keep = max(floor, len(m.content) - (total - target) * 4 - 256)
            head = max(keep * 3 // 5, min(floor, keep))
            tail = max(0, keep - head)
            new_text, span = snip_stage.head_tail(m.content, head, tail,
                                                  lambda r: f"\n...[{r} chars cut so the request fits the window]...\n")
            new = m.with_content(new_text)
            before, after = heuristic_message(m), heuristic_message(new)
            if after >= before:
                break
            edits.append(Edit(m.id, "shape_history", "snipped", (span,), before, after,
                              f"request over hard limit {target} after keeping {policy.shape_keep_last_min} turns"))
            msgs[best] = new
            total = count(msgs)
    return msgs, edits
