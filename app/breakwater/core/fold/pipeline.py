"""The compaction pipeline (SPEC §4) as a fold over the session log.

`Pipeline` is fed the log's entries in order; before each request `plan()`
decides what to send and `materialize()` (core/fold/materialize.py) builds the
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

Its parts, one module each: the stage forms of a message and their caches (core/fold/stage_forms.py),
the soft-zone search and the counts of request shapes (core/fold/soft_zone.py), the plan of a request the
search would end where it ended before (core/fold/next_plan.py), deep compaction and the head after a
summary (core/stages/deep_compaction.py); the plan itself is core/fold/plan.py. The cache-stable prefix
(core/fold/stable_prefix.py) is an object of its own, `self.prefix`.
The others are still mixed into `Pipeline` (issue 22: each to become a collaborator like the prefix).
"""

from __future__ import annotations

import bisect
from array import array
from dataclasses import replace
from typing import Iterable

from breakwater.core.fold import materialize as build
from breakwater.core.stages.deep_compaction import RECORDED as RECORDED  # imported from here by the formats
from breakwater.core.stages.deep_compaction import WAITS, Compaction, DeepCompaction, _Active
from breakwater.core.log.edits import View
from breakwater.core.fold.ledger import Ledger
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.fold.next_plan import NextPlan
from breakwater.core.fold.plan import Plan as Plan  # imported from here by the tests
from breakwater.core.policy import Policy
from breakwater.core.fold.own_request import OwnRequest
from breakwater.core.stages.sanitize import Sanitizer
from breakwater.core.log.session_log import Entry, Event
from breakwater.core.stages.shape import join_users
from breakwater.core.fold.soft_zone import SoftZone
from breakwater.core.fold.stable_prefix import CachePrefix
from breakwater.core.fold.stage_forms import _FORMS as _FORMS  # the tests clear it through this module
from breakwater.core.fold.stage_forms import _NEXT_POLICY_ID, _POLICY_IDS, StageForms
from breakwater.core.log.accounting import Calibration
from breakwater.core.stages.extractive import ExtractiveSummarizer
from breakwater.core.stages.summarize import Summarizer, summary_message_text
from breakwater.core.log.tokens import TokenCounter, heuristic_message, lower_message

LEVEL_NAMES = {0: "none", 1: "snip", 2: "mask", 3: "microcompact"}
STAGE_LEVEL = {"snip": 1, "mask": 2, "microcompact": 3}


class Pipeline(StageForms, SoftZone, NextPlan, DeepCompaction):
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
        self._ids: dict[str, int] = {}          # log message id -> sanitized index, for out[:_indexed]
        self._indexed = 0
        self._looked = 0                        # messages looked through since (see `_index_of`)
        self._exact: dict[int, tuple[int, array]] = {}  # level -> (base index, prefix sums)
        self._lower: dict[int, tuple[int, array]] = {}  # the same of core/log/tokens.py lower_message
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
        self.prefix = CachePrefix()             # the last request planned, for the next one's cache-stable prefix
        self.own = OwnRequest()                 # the log's agent's request: the other side of its usage figures
        self._measured: dict[tuple, tuple] = {}   # one plan's counted request shapes
        self._joined: dict[tuple[int, ...], tuple] = {}   # parts of a joined head -> (parts, joined, absorbed)
        self._frames: dict[tuple[int, bool], tuple] = {}  # (start, start < n) -> (summary, pins, frame)
        self._frames_reach = -1                 # the highest start in _frames: a change past it keeps them all
        self._pins_version = 0
        self._fu: int | None = None             # index of the first user message, once found
        self._fu_scanned = 0                    # out[:_fu_scanned] holds no user message (when _fu is None)
        self._observations: list[int] = []      # sanitized indices of observations (policy.mask_keep_observations)

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
                placed = self._placed(comp)
                if placed is not None:
                    if comp.trigger != "auto":   # the log's agent made it: its requests had it
                        self.own.take(placed)
                    if self._admit(placed) and comp.policy != self.policy.fingerprint():
                        # another agent's summary, sent under every policy: part of the history without ours
                        self.raw_tokens += heuristic_message(placed.message)
        elif ev.type == "trigger":
            level = STAGE_LEVEL.get(str(ev.get("stage")))
            if level:
                self.triggers[ev.id] = level
        elif ev.type == "undo":
            self._undo(str(ev.get("target")))
            self.own.undo(str(ev.get("target")))
        elif ev.type in ("pin", "unpin"):
            mid = str(ev.get("message_id"))
            if ev.type == "pin":
                self.pin_events[ev.id] = mid
            self._set_pin(mid, ev.type == "pin")
        elif ev.type == "config":
            window = ev.get("window")
            if isinstance(window, int) and not isinstance(window, bool) and 0 < window != self.policy.window:
                self._retune(self.policy.with_changes(window=window))
        elif ev.type == "usage":
            prompt = ev.get("prompt_tokens")
            if isinstance(prompt, int):
                self.api_tokens = prompt
                est = ev.get("estimate")
                if not isinstance(est, int):   # another agent's figure (core/fold/own_request.py)
                    est = self.own.estimate(ev.get("turn"))
                if isinstance(est, int):
                    self.calibration.observe(prompt, est)

    def _retune(self, policy: Policy) -> None:
        """From here on, plan under `policy` (a live session learnt the model's real window)."""
        self.policy = policy
        self._policy_id = _POLICY_IDS.setdefault(policy, next(_NEXT_POLICY_ID))
        self._soft_limit, self._hard_limit = policy.soft_limit, policy.hard_limit
        # what was measured against the old limits
        self._measured.clear()
        self._soft_boundary.clear()
        self._near_cache.clear()

    def applied(self, compaction_id: str) -> bool:
        """Whether a compaction of the log is in effect (one of another policy is not)."""
        return any(a.comp.id == compaction_id for a in self.active)

    def _set_pin(self, mid: str, pinned: bool) -> None:
        (self.pins.add if pinned else self.pins.discard)(mid)
        self._pins_version += 1
        self._sync()
        idx = self._index_of(mid, look=False)   # pins are asked about every request: enter them all
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
        self.prefix.changed(d)
        if d < len(ledger.tok0):   # messages changed, not only added: forget what was derived from them
            for i in range(d, len(ledger.tok0)):
                self._near_cache.pop(i, None)
            ledger.truncate(d)
            for sums in (self._exact, self._lower):
                for L, (base, arr) in list(sums.items()):
                    if d < base:
                        del sums[L]
                    else:
                        del arr[d - base + 1:]
        if d <= self._frames_reach:
            self._frames = {k: v for k, v in self._frames.items() if k[0] < d}
            self._frames_reach = max((k[0] for k in self._frames), default=-1)
        if self._fu is not None and self._fu >= d:
            self._fu = None
        if d < self._fu_scanned:
            self._fu_scanned = d
        if d < self._indexed:
            self._indexed = d
        observations = self._observations
        if self.policy.mask_keep_observations:
            del observations[bisect.bisect_left(observations, d):]
        else:
            observations = None
        fresh = self._fresh
        pins, fold_min = self.pins, self.policy.fold_min_chars
        add, shared_forms = ledger.add, self._shared_forms
        for i in range(d, len(out)):
            entry = out[i]
            msg = entry.message
            t0 = fresh.get(id(msg))
            if t0 is None:
                t0 = heuristic_message(msg)
            role = msg.role
            # the soft-zone stages change observations and assistant text only (SPEC §4), the text
            # only by folding it when it is longer than `fold_min_chars` (most replies of a chat are not)
            if role == "tool" or (role == "assistant" and len(msg.content) > fold_min) \
                    or (role == "user" and msg.is_observation):
                add(t0, role != "tool", () if pins and any(s in pins for s in entry.sources) else shared_forms(msg))
                if role == "tool" and msg.meta:
                    src = msg.meta.get("source")
                    if isinstance(src, dict) and src.get("dropped_lines"):
                        ledger.add_truncated(i)
                if observations is not None and role != "assistant":
                    observations.append(i)
            else:
                add(t0, True)

    def _index_of(self, mid: str, look: bool = True) -> int | None:
        """Index of the sanitized message that stands for log message `mid` (the last, if several do).

        Ids are entered when asked, not as each message arrives: only pins and compactions ask, and
        a long chat with few would otherwise hold an entry per message (a million cost ~1 s and 60 MB).
        Asked about one not entered yet, it looks at the newest first (a compaction names a message
        near the end), and enters them all once it has looked through as many as that would take."""
        out = self.san.out
        known = min(len(self.ledger.tok0), len(out))
        lo = self._indexed
        room = known - lo - self._looked if look else 0
        if room > 0:
            stop = max(lo, known - room)
            for i in range(known - 1, stop - 1, -1):
                if mid in out[i].sources:
                    self._looked += known - i
                    return i
            if stop == lo:   # none of those not entered yet is it
                self._looked += known - lo
                return self._ids.get(mid)
        ids = self._ids
        for i in range(lo, known):
            for sid in out[i].sources:
                ids[sid] = i
        self._indexed, self._looked = known, 0
        return ids.get(mid)

    def _raw_tokens(self) -> int:
        """The whole log so far by the seed's heuristic, never calibrated: one rule, so it never shrinks."""
        return self.raw_tokens

    def _near_start(self, level: int, start: int, n: int) -> int:
        """First index treated as working memory: only masking (level 2 and up) tells near from far.
        Working memory is the last `working_memory_messages` messages, or with `mask_keep_observations`
        (SWE-agent's LastNObservations) everything from the M-th last observation on."""
        if level < 2:
            return n
        keep = self.policy.mask_keep_observations
        if not keep:
            return max(start, n - self.policy.working_memory_messages)
        obs = self._observations
        k = bisect.bisect_left(obs, n)
        return max(start, obs[k - keep]) if k >= keep else start

    # -- the decision --------------------------------------------------------------------------------
    def plan(self, force_deep: str | None = None) -> Plan:
        """Decide the next request. May perform (and return) a deep compaction."""
        self.san.close_group()
        self._sync()
        self._measured = {}
        p = self.policy
        n = len(self.san.out)

        def base_of(cut: int) -> tuple[tuple, tuple[int, str, int]]:
            framed = self._frame(cut, n)
            return framed, self._measure(framed[0], 0, framed[1], n, n, None, None, framed[4])

        # the whole request from the cut at no stage: the zone, and the soft zone's first shape
        cut = self._cut()
        framed, measured = base_of(cut)
        base, counted = measured[0], measured[1]
        self.own.plan(self, n, measured[2])
        if counted == "estimate" and not (force_deep or self.triggers or self._compacted_since_view
                                          or self._undone_since_view):
            plan = self._plan_safe(n, cut, framed, base, measured[2]) \
                or self._plan_next(n, cut, framed, base, measured[2])
            if plan is not None:
                return self._finish(plan)
        notes: list[str] = []
        new_comp: Compaction | None = None
        raw_tokens = self._raw_tokens()
        trigger_level = max(self.triggers.values(), default=0) if self.triggers else 0
        over = base > self._hard_limit and n >= p.fast_path_min_messages
        if over and not force_deep and not p.deep_compact_first and self._stage_levels:
            top = self._stage_levels[-1]
            jh, js, _, _, head_h = framed
            over = self._measure(jh, top, js, self._near_start(top, js, n), n, None, None, head_h)[0] > self._hard_limit
        undone = self._undone_since_view
        # after one compaction that could not bring the request under the soft limit, the next waits
        # until shaping drops a batch worth summarizing (below): one each turn would settle nothing
        settled = force_deep or not self.active or not (over or trigger_level) or self._settles(n)
        due = over and p.deep_compact and not self._compacted_since_view and not undone
        if force_deep or (due and settled):
            new_comp = self._deep_compact(force_deep or "auto", base)
            if new_comp is None:
                notes.append("deep compaction found nothing to summarize")
        recorded = self.active[-1].comp if self._compacted_since_view and new_comp is None else None
        zone_counted = counted
        if self._compacted_since_view:
            # a compaction just happened (here, or recorded in the log right before this
            # request): the zone is the one that triggered it, the rest is decided after it
            base_reported = self.active[-1].comp.tokens_before or base
            framed, measured = base_of(self._cut())
            base, counted = measured[0], measured[1]
            if new_comp is None:   # one made here reports the request it was made for, counted as that was
                zone_counted = counted
        else:
            base_reported = base
        self._compacted_since_view = self._undone_since_view = False
        zone = "safe" if base_reported <= self._soft_limit else ("soft" if base_reported <= self._hard_limit else "hard")
        fast = base <= self._soft_limit or n < p.fast_path_min_messages

        shape = self._fit(n, trigger_level, fast, (framed, measured) if trigger_level == 0 else None)
        batch = self._batch_tokens(shape.drop_to) if shape.drop_to > shape.cut and not settled else 0
        # the room a compaction is for: the soft zone's width of history, summarized at once
        room = self._hard_limit - self._soft_limit
        waits = f"{WAITS}: a summary cannot bring this request under the soft limit ({self._soft_limit:,})"
        if not settled and shape.drop_to > shape.cut and batch < room and shape.sent <= p.window:
            notes.append(f"{waits}, so turns leave by shaping until {batch:,} of {room:,} tokens can be "
                         f"summarized at once")
        elif shape.drop_to > shape.cut and p.deep_compact and not undone:
            # shaping would drop turns: they leave the context through a summary instead (all but the
            # last turn when no summary settles the request: the next one is then as far off as can be)
            if new_comp is not None:
                self._retract(new_comp)
            cut = shape.drop_to if settled else max(shape.drop_to, self._last_turn_start(n))
            new_comp = self._deep_compact(new_comp.trigger if new_comp else (force_deep or "auto"), base_reported,
                                          cut=cut) or new_comp
            self._compacted_since_view = False
            shape = self._fit(n, trigger_level, fast)
        elif due and not settled:
            notes.append(waits)
        if new_comp is not None:
            new_comp = replace(new_comp, tokens_after=base_of(self._cut())[1][0])
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

    def _plan_safe(self, n: int, cut: int, framed: tuple, est: int, h: int) -> Plan | None:
        """The plan of a request with nothing pending (no trigger, no compaction just made or undone)
        under the soft limit, or in the soft zone when no stage changes a message sent (a long chat of
        short messages): what the general path decides then, in a few lookups. None otherwise.
        `est` and `h`: the request at no stage by the calibrated and the plain heuristic, an estimate
        (not near the limits, where tiktoken counts); `framed`: `_frame` of the cut."""
        p = self.policy
        jh, js, joined, kept_fu, head_h = framed
        if est <= self._soft_limit:
            zone, level, near_start = "safe", 0, n
        elif est <= self._hard_limit and n >= p.fast_path_min_messages \
                and not self.ledger.changes(self._stage_levels, js, n):
            # every stage level sends this same request: the search (`_fit`) ends at the highest
            zone, level = "soft", self._stage_levels[-1] if self._stage_levels else 0
            near_start = self._near_start(level, js, n)
        else:
            return None
        # positional: keyword arguments cost a dataclass of this size several times its construction
        plan = Plan(self.turn + 1, n, cut, js, level, near_start, kept_fu, jh, self._raw_tokens(), est, est, zone,
                    "estimate", est <= p.window, "estimate", False, None, {}, [], self.api_tokens, None, level,
                    near_start, cut, joined, None, h, None, head_h)
        prev = self.prefix.previous
        if prev is not None and prev.head is jh and prev.start == js and prev.built is None \
                and (zone == "soft" or not (prev.level or prev.lower)):
            # the same head, and no message sent changed by a stage on either side (in the soft zone
            # here, no stage level changes any): the request is the previous one up to the first
            # message changed or added since
            end = min(prev.n, n, self.prefix.changed_from)
            if end >= js:
                prefix = self.ledger.prefix   # level 0: ledger.tokens is a difference of prefix sums
                plan.stable_prefix_tokens = self.calibration.apply(head_h + prefix[end] - prefix[js])
        return plan

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

    def _finish(self, plan: Plan) -> Plan:
        """The plan completed: its edits counted, built when shaping squeezes it, its cache-stable
        prefix and its tokens without compaction."""
        plan.counts = build.counts(self, plan)
        if plan.squeeze:
            view = plan.built = self.materialize(plan)
            plan.sent_tokens, plan.counted, plan.fits = view.sent_tokens, view.counted, view.fits
            plan.counts = view.edit_counts()
            plan.sent_heuristic = sum(heuristic_message(m) for m in view.messages)
        if plan.stable_prefix_tokens is None:
            plan.stable_prefix_tokens = self.prefix.tokens(plan, self.ledger, self._transform, self.calibration)
        # without compaction: this request plus what the policy took out of the whole log, counted
        # by the same calibration (core/log/accounting.py), so that saved = without − with
        plan.raw_tokens = plan.sent_tokens + self.calibration.scale(plan.raw_tokens - plan.sent_heuristic)
        if plan.built is not None:
            plan.built = replace(plan.built, stable_prefix_tokens=plan.stable_prefix_tokens,
                                 raw_tokens=plan.raw_tokens)
        self.prefix.advance(plan)
        return plan

    # -- building the request (core/fold/materialize.py) ---------------------------------------------------
    def materialize(self, plan: Plan) -> View:
        """The messages to send and every edit behind them."""
        return build.materialize(self, plan)

    def count(self, msgs: list[Message]) -> tuple[int, str]:
        """Tokens of a request as this pipeline counts (core/log/accounting.py): the fitted heuristic, or
        near the limits tiktoken's count plus the unseen overhead."""
        h = sum(heuristic_message(m) for m in msgs)
        if self._in_band(h):
            # as `_measure` decides it (core/fold/soft_zone.py); a bound is at most twice the heuristic
            est = self.calibration.apply(h)
            lo = sum(lower_message(m) for m in msgs) if self._maybe_past(est, 2 * h) else 0
            if self._past_limits(est, lo):
                return self._bounded(est, lo), "estimate"
            return self.counter.exact_messages(msgs) + self.calibration.overhead, "exact"
        return self.calibration.apply(h), "estimate"

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
            _ids=self._ids.copy(), _indexed=self._indexed, _looked=self._looked,
            _exact={L: (base, arr[:]) for L, (base, arr) in self._exact.items()},
            _lower={L: (base, arr[:]) for L, (base, arr) in self._lower.items()},
            _fresh=self._fresh.copy(), _near_cache={i: by.copy() for i, by in self._near_cache.items()},
            active=[replace(a) for a in self.active], triggers=self.triggers.copy(), pins=self.pins.copy(),
            pin_events=self.pin_events.copy(), api_tokens=self.api_tokens,
            compactions_applied=self.compactions_applied, _compacted_since_view=self._compacted_since_view,
            _undone_since_view=self._undone_since_view, _last_failure=self._last_failure,
            _soft_boundary=self._soft_boundary.copy(),
            prefix=self.prefix.copy(), own=self.own.copy(), _measured=self._measured.copy(),
            _joined=self._joined.copy(), _frames=self._frames.copy(),
            _frames_reach=self._frames_reach, _pins_version=self._pins_version, _fu=self._fu,
            _fu_scanned=self._fu_scanned, _observations=self._observations.copy(),
            _soft_limit=self._soft_limit, _hard_limit=self._hard_limit, _stage_levels=self._stage_levels,
            _policy_id=self._policy_id)
        return new
