"""The compaction pipeline (SPEC §4) as a fold over the session log.

`Pipeline` is fed the log's entries in order; before each request `plan()` decides what to send and
`materialize()` (core/fold/materialize.py) builds the messages and edits. The result depends only
on (log, policy): deep compactions it decides are returned as events that the caller appends to the
log (the agent) or keeps aside (simulation), and recorded events are re-applied on replay, so a
replay gives back exactly the same views.

Stages for every request (`plan`):
  1 sanitize (incremental)      2 apply persisted summaries
  3 fast path                   4 soft zone: snip -> mask -> microcompact, until under soft
  5 hard zone: deep compact     6 shape history: keep-last 20 -> 3, then head/tail the largest

Per-message work is done once, when a message arrives: its token count at every stage level is kept
in prefix sums, so a request costs O(1) arithmetic plus the few messages of working memory, not a
pass over the history.

`Pipeline` composes its parts, each an object that holds its own state, one module each:
  index        the incremental index: the ledger, the stage forms, the pins (core/fold/index.py)
  meter        how a request is counted, and the calibration (core/fold/meter.py)
  deep         the deep compactions in effect, deciding one, the head after it (core/fold/compactions.py)
  frames       the head and first message of a request from a given start (core/fold/frames.py)
  soft_zone    the soft zone's search and shape history (core/fold/soft_zone.py)
  short_cuts   the plans made in a few lookups when nothing is pending (core/fold/short_cuts.py)
  prefix       the previous request, for the cache-stable prefix (core/fold/stable_prefix.py)
  own          the request the log's own agent sent, for its usage figures (core/fold/own_request.py)
  gate         what it knows of the provider's prompt cache, to weigh a step against it (core/fold/cache_gate.py)
It keeps what the log's events say (the turn, triggers, pins by event, the API's count) and the
sanitizer, which every part reads through the index.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace
from typing import Iterable

from breakwater.core.fold import materialize as build
from breakwater.core.fold.cache_gate import CacheGate
from breakwater.core.fold.cache_worth import CachedRequest, CachePricing
from breakwater.core.fold.compactions import DeepCompaction
from breakwater.core.fold.frames import Frames
from breakwater.core.fold.index import Index
from breakwater.core.fold.meter import Meter
from breakwater.core.fold.own_request import OwnRequest
from breakwater.core.fold.plan import Plan as Plan  # imported from here by the tests
from breakwater.core.fold.short_cuts import ShortCuts
from breakwater.core.fold.soft_zone import Shape, SoftZone
from breakwater.core.fold.stable_prefix import CachePrefix, counted_as_sent, part_as_sent
from breakwater.core.fold.stage_forms import _FORMS as _FORMS  # the tests clear it through this module
from breakwater.core.fold.stage_forms import stage_levels
from breakwater.core.log.edits import View
from breakwater.core.log.message import Message
from breakwater.core.log.session_log import Entry, Event
from breakwater.core.log.tokens import TokenCounter, heuristic_message
from breakwater.core.policy import Policy
from breakwater.core.stages.deep_compaction import RECORDED as RECORDED  # imported from here by the formats
from breakwater.core.stages.deep_compaction import WAITS, Compaction
from breakwater.core.stages.extractive import ExtractiveSummarizer
from breakwater.core.stages.sanitize import Sanitizer
from breakwater.core.stages.summarize import Summarizer

LEVEL_NAMES = {0: "none", 1: "snip", 2: "mask", 3: "microcompact"}
STAGE_LEVEL = {"snip": 1, "mask": 2, "microcompact": 3}


@dataclass(slots=True)
class _Request:
    """The request from a cut at no stage: its frame (`Frames.frame`) and count (`Meter.measure`)."""

    n: int
    cut: int
    framed: tuple
    measured: tuple[int, str, int]


@dataclass(slots=True)
class _Decision:
    """What the general path has decided so far for one request."""

    request: _Request          # from the cut after any compaction
    force_deep: str | None
    trigger_level: int         # the lowest stage level a trigger asks for
    undone: bool               # a compaction was taken back since the last request: none is redone now
    settled: bool = True       # a compaction now could bring the request under the soft limit
    due: bool = False          # the request calls for a compaction (over the hard limit, nothing pending)
    base_reported: int = 0     # the request at no stage that decided the zone (before a compaction)
    zone_counted: str = "estimate"   # and how it was counted
    new_comp: Compaction | None = None
    recorded: Compaction | None = None   # a compaction from the log applied right before this request
    fast: bool = False         # under the soft limit, or too short for the soft zone
    notes: list[str] = field(default_factory=list)
    kept_before: dict | None = None   # the soft zone's kept boundaries before its search (the cache gate's)


class Pipeline:
    def __init__(self, policy: Policy, counter: TokenCounter | None = None, mode: str = "exact",
                 summarizer: Summarizer | None = None, own_usage: bool = True,
                 cache_pricing: CachePricing | None = None):
        """`own_usage`: follow the request the log's own agent sent, for usage figures without an
        estimate (own_request.wanted_for says whether a log has any). `cache_pricing`: the provider's
        cache prices for the log's model (`CachePricing.for_model`), which `cache_horizon_turns` weighs
        soft-zone steps by; None: unknown, every step is taken."""
        self.policy = policy
        self.gate = CacheGate(cache_pricing)
        # asked for many times a request; the policy works them out each time
        self._soft_limit, self._hard_limit = policy.soft_limit, policy.hard_limit
        self._stage_levels = stage_levels(policy)
        self.san = Sanitizer()
        self.index = Index(policy, self.san, counter or TokenCounter(None))
        self.meter = Meter(policy, self.index, self.index.counter, mode)
        self.deep = DeepCompaction(policy, self.index, self.meter, summarizer or ExtractiveSummarizer())
        self.frames = Frames(self.index, self.deep)
        self.soft_zone = SoftZone(policy, self.index, self.meter, self.frames)
        self.prefix = CachePrefix()             # the last request planned, for the next one's cache-stable prefix
        self.short_cuts = ShortCuts(policy, self.index, self.meter, self.soft_zone, self.deep, self.prefix)
        self.own = OwnRequest(wanted=own_usage)  # the log's agent's request: the other side of its usage figures
        self.turn = 0
        self.raw_tokens = 0                     # heuristic tokens of every raw message so far
        self.triggers: dict[str, int] = {}      # trigger event id -> stage level
        self.pin_events: dict[str, str] = {}    # pin event id -> message id, so an undo can name a pin
        self.api_tokens: int | None = None
        self.api_turn: int | None = None        # the request api_tokens was reported for
        self.short_cuts.gated = self._gated()

    # what the drivers and the views read of the parts
    ledger = property(lambda self: self.index.ledger)
    calls = property(lambda self: self.index.calls)
    pins = property(lambda self: self.index.pins)
    counter = property(lambda self: self.meter.counter)
    mode = property(lambda self: self.meter.mode)
    calibration = property(lambda self: self.meter.calibration)
    summarizer = property(lambda self: self.deep.summarizer)
    active = property(lambda self: self.deep.active)
    compactions_applied = property(lambda self: self.deep.applied_count)

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
            self.meter.calibration.sent()
            resent = entry.meta.get("resent_tokens") if entry.meta else None
            if isinstance(resent, int) and resent > 0:   # sent again with every request until the next user message
                self.meter.calibration.resent += resent
        elif entry.role == "user":
            self.meter.calibration.resent = 0
        self.gate.feed(entry)
        self.raw_tokens += self.index.arrive(entry)
        self.san.feed(entry)

    def _feed_event(self, ev: Event) -> None:
        if ev.type == "compaction":
            comp = Compaction.from_event(ev)
            if comp.trigger != "auto" or comp.policy == self.policy.fingerprint():
                # the summary ends the open call group: a call still unanswered is stripped now, not
                # after the cut was measured (the cut would then point past the end)
                self.san.close_group()
                self.sync()
                placed = self.deep.place(comp)
                if placed is not None:
                    if comp.trigger == RECORDED:
                        # another agent's own compaction: its requests had it, its history restarts, and the
                        # overhead it sends (its system prompt, tools) is fitted again. Its summary is sent
                        # under every policy: part of the transcript, so of the history without compaction
                        # whether or not this pipeline applies it (an overlay may have undone it). Ours
                        # (manual: a D in the workbench's overlay, or after a context-length error in a live
                        # session) are compaction: neither the agent's request nor the history without it,
                        # and a live session's is fitted on without a restart (a replay sends what it sent)
                        self.own.take(placed)
                        self.meter.calibration.restart()
                        self.raw_tokens += heuristic_message(placed.message)
                    self.deep.admit(placed)
        elif ev.type == "trigger":
            level = STAGE_LEVEL.get(str(ev.get("stage")))
            if level:
                self.triggers[ev.id] = level
        elif ev.type == "undo":
            # the agent's own request is what it sent: an undo in the overlay changes ours, not its
            self._undo(str(ev.get("target")))
        elif ev.type in ("pin", "unpin"):
            mid = str(ev.get("message_id"))
            if ev.type == "pin":
                self.pin_events[ev.id] = mid
            self._set_pin(mid, ev.type == "pin")
        elif ev.type == "config":
            window = ev.get("window")
            if isinstance(window, int) and not isinstance(window, bool) and 0 < window != self.policy.window:
                self._retune(self.policy.with_changes(window=window))
        elif ev.type == "note" and ev.get("kind") == "request":   # a proxy's: the whole request is in the log
            self.meter.whole_request(ev.get("tools"))
        elif ev.type == "usage":
            prompt = ev.get("prompt_tokens")
            if isinstance(prompt, int):
                self.api_tokens = prompt
                turn = ev.get("turn")
                self.api_turn = turn if isinstance(turn, int) and not isinstance(turn, bool) else self.turn
                est = ev.get("estimate")
                if not isinstance(est, int):   # another agent's figure (core/fold/own_request.py)
                    est = self.own.estimate(ev.get("turn"))
                if isinstance(est, int):
                    self.meter.calibration.observe(prompt, est)
                self.gate.usage(turn, ev.get("cached_tokens"))   # what the provider read of the request cached

    def _retune(self, policy: Policy) -> None:
        """From here on, plan under `policy` (a live session learnt the model's real window)."""
        self.policy = policy
        self._soft_limit, self._hard_limit = policy.soft_limit, policy.hard_limit
        self._stage_levels = stage_levels(policy)
        for part in (self.index, self.meter, self.deep, self.soft_zone, self.short_cuts):
            part.retune(policy)
        self.short_cuts.gated = self._gated()

    def _gated(self) -> bool:
        """Whether soft-zone steps are weighed against the cache they break (`_cache_gate`)."""
        return bool(self.policy.cache_horizon_turns) and self.gate.pricing is not None

    def applied(self, compaction_id: str) -> bool:
        """Whether a compaction of the log is in effect (one of another policy is not)."""
        return self.deep.applied(compaction_id)

    def _set_pin(self, mid: str, pinned: bool) -> None:
        self.index.set_pin(mid, pinned)
        self.sync()
        idx = self.index.index_of(mid, look=False)   # pins are asked about every request: enter them all
        if idx is not None:
            self._enter_from(idx)

    def _undo(self, target: str) -> None:
        self.triggers.pop(target, None)
        if target in self.pin_events:
            self._set_pin(self.pin_events.pop(target), False)
        self.deep.undo(target)

    def withdraw(self, compaction_id: str) -> None:
        """Take back a compaction this pipeline just decided that was never logged (the user
        cancelled its preview): the state is as if it had not been proposed."""
        self.deep.withdraw(compaction_id)

    def replace_summary(self, compaction_id: str, summary: str) -> Compaction:
        """Swap the text of an applied compaction (a summary the user edited before it was sent);
        the next view is built with it, as replaying the edited compaction event would."""
        return self.deep.replace_summary(compaction_id, summary)

    def sync(self) -> None:
        """Enter what the sanitizer changed or added since in the index (`plan` does, first), and tell
        the parts that keep what was derived from the messages."""
        d = self.index.sync()
        if d is not None:
            self.prefix.changed(d)
            self.frames.changed(d)

    def _enter_from(self, d: int) -> None:
        self.prefix.changed(d)
        self.frames.changed(d)
        self.index.enter_from(d)

    # -- the decision --------------------------------------------------------------------------------
    def plan(self, force_deep: str | None = None) -> Plan:
        """Decide the next request, the seed's stages in order. May perform (and return) a deep compaction."""
        n = self._sanitize()                             # 1 sanitize what arrived since
        request = self._request_at_no_stage(n)           # 2 the summaries applied: the request from their cut
        self.own.plan(self.deep, self.frames, self.turn, n, request.measured[2])   # the log's agent's, beside
        plan = self._fast_path(request, force_deep)      # 3 nothing pending: the plan in a few lookups
        if plan is None:
            # 5 the hard zone is decided first: the soft zone's search starts from the cut it leaves
            decision = self._deep_compaction(request, force_deep)
            shape = self._soft_zone(decision)            # 4 snip -> mask -> microcompact, oldest first; 6 shape
            shape = self._cache_gate(decision, shape)    #   a step only where it pays for the cache it breaks
            shape = self._summarize_what_shaping_drops(decision, shape)
            plan = self._plan_of(decision, shape)
        plan.api_turn = self.api_turn
        return self._finish(plan)

    def _sanitize(self) -> int:
        self.san.close_group()
        self.sync()
        self.meter.new_plan()
        return len(self.san.out)

    def _request_at_no_stage(self, n: int) -> _Request:
        cut = self.deep.cut()
        framed = self.frames.frame(cut, n)
        return _Request(n, cut, framed, self.meter.measure(framed[0], 0, framed[1], n, n, None, None, framed[4]))

    def _fast_path(self, request: _Request, force_deep: str | None) -> Plan | None:
        """The plan when nothing is pending (no trigger, no compaction asked for, made or undone) and
        the short cuts settle it; None when the general path must decide."""
        base, counted, plain = request.measured
        if force_deep or self.triggers or self.deep.just_compacted or self.deep.just_undone:
            return None
        if counted != "estimate" and self.deep.last_failure:
            return None   # a rejected summary to be noted (`_plan_of`)
        if self._over_message_count(request):
            return None   # a deep compaction by message count (OpenHands' condenser)
        stamp = (self.turn + 1, self.raw_tokens, self.api_tokens)
        return self.short_cuts.plan(request.n, request.cut, request.framed, base, plain, stamp, counted)

    def _over_message_count(self, request: _Request) -> bool:
        """Whether the request holds more messages than `compact_trigger_messages` allows (0: no such limit)."""
        limit = self.policy.compact_trigger_messages
        return bool(limit) and len(request.framed[0]) + request.n - request.framed[1] > limit

    def _deep_compaction(self, request: _Request, force_deep: str | None) -> _Decision:
        """Stage 5: summarize the history before a cut when asked to, or when even every stage leaves
        the request over the hard limit. The zone is the one of the request that triggered it; the
        rest is decided from the cut after it."""
        p, deep, n = self.policy, self.deep, request.n
        decision = _Decision(request, force_deep, max(self.triggers.values(), default=0) if self.triggers else 0,
                             deep.just_undone)
        base = request.measured[0]
        counted_out = self._over_message_count(request)
        over = (base > self._hard_limit and n >= p.fast_path_min_messages) or counted_out
        if over and not counted_out and not force_deep and not p.deep_compact_first and self._stage_levels:
            top = self._stage_levels[-1]
            jh, js, _, _, head_h = request.framed
            over = self.meter.measure(jh, top, js, self.index.near_start(top, js, n), n, None, None,
                                      head_h)[0] > self._hard_limit
        # after one compaction that could not bring the request under the soft limit, the next waits
        # until shaping drops a batch worth summarizing (`_summarize_what_shaping_drops`): one each
        # turn would settle nothing
        decision.settled = bool(force_deep or not deep.active or not (over or decision.trigger_level)
                                or deep.settles(n))
        decision.due = over and p.deep_compact and not deep.just_compacted and not decision.undone
        if force_deep or (decision.due and decision.settled):
            decision.new_comp = deep.compact(force_deep or "auto", base, self.turn)
            if decision.new_comp is None:
                decision.notes.append("deep compaction found nothing to summarize")
        decision.base_reported, decision.zone_counted = base, request.measured[1]
        if deep.just_compacted:
            # a compaction just happened (here, or recorded in the log right before this request)
            decision.base_reported = deep.active[-1].comp.tokens_before or base
            decision.request = self._request_at_no_stage(n)
            if decision.new_comp is None:   # one made here reports the request it was made for, counted as that was
                decision.recorded = deep.active[-1].comp
                decision.zone_counted = decision.request.measured[1]
        deep.seen()
        return decision

    def _soft_zone(self, decision: _Decision) -> Shape:
        """Stages 4 and 6: the lowest stage level, applied oldest first only as far as needed, that
        brings the request under the soft limit; then shape history if it is still over the hard one."""
        r = decision.request
        decision.fast = r.measured[0] <= self._soft_limit or r.n < self.policy.fast_path_min_messages
        level = decision.trigger_level
        if self.short_cuts.gated:
            decision.kept_before = self.soft_zone.kept_boundaries()
        return self.soft_zone.fit(self.deep.cut(), r.n, level, decision.fast,
                                  (r.framed, r.measured) if level == 0 else None)

    def _cache_gate(self, d: _Decision, shape: Shape) -> Shape:
        """The request keeping the previous compaction instead of `shape`, when the step from one to the
        other (snipping or masking more) costs more in cache re-writes than it saves over the requests
        ahead (until the request is back at the soft limit, at the session's growth so far: `turns_ahead`)
        at the model's cache prices and the misses seen (core/fold/cache_worth.py), and keeping it stays
        under the hard limit. Only the soft zone's own steps are weighed: a trigger, a summary, an undo
        is done as asked."""
        prev, n = self.prefix.previous, d.request.n
        if d.kept_before is None or prev is None or d.force_deep or d.trigger_level or d.undone \
                or d.new_comp is not None or d.recorded is not None or prev.cut != shape.cut:
            return shape
        held = self.soft_zone.held(prev, n)
        if held.sent > self._hard_limit or (held.level, held.lower, held.boundary, held.start) == \
                (shape.level, shape.lower, shape.boundary, shape.start):
            return shape
        ledger, transform = self.index.ledger, self.index.transform
        kept_h = self.prefix.shared(held, n, ledger, transform)
        step_h = self.prefix.shared(shape, n, ledger, transform)
        if kept_h is None or step_h is None:
            return shape
        calibration = self.meter.calibration
        cold = self.gate.cold()

        def cached(s: Shape, h: int) -> CachedRequest:
            return CachedRequest(s.sent, 0 if cold else min(s.sent, part_as_sent(calibration, s.counted, s.sent,
                                                                                    s.heuristic, h)))
        growth = calibration.scale(self.raw_tokens) / max(1, self.turn)
        worth = self.gate.weigh(cached(held, kept_h), cached(shape, step_h), self.policy.cache_horizon_turns,
                                self._soft_limit - shape.sent, growth)
        if worth.pays or worth.freed == worth.rewritten == 0:   # or the step changes nothing sent
            return shape
        if worth.freed > 0:
            d.notes.append(worth.note(LEVEL_NAMES[max(shape.level, shape.lower)]))
        self.soft_zone.restore(d.kept_before)
        return held

    def _summarize_what_shaping_drops(self, decision: _Decision, shape: Shape) -> Shape:
        """Turns shaping would drop leave the context through a summary instead (stage 5 again); when
        no summary settles the request, they leave by shaping until a batch worth summarizing has."""
        deep, n, drops = self.deep, decision.request.n, shape.drop_to > shape.cut
        batch = deep.batch_tokens(shape.drop_to) if drops and not decision.settled else 0
        room = self._hard_limit - self._soft_limit   # the room a compaction is for: the soft zone's width
        waits = f"{WAITS}: a summary cannot bring this request under the soft limit ({self._soft_limit:,})"
        if not decision.settled and drops and batch < room and shape.sent <= self.policy.window:
            decision.notes.append(f"{waits}, so turns leave by shaping until {batch:,} of {room:,} tokens "
                                  f"can be summarized at once")
        elif drops and self.policy.deep_compact and not decision.undone:
            # all but the last turn when no summary settles the request: the next one is then as far off
            # as can be
            new_comp = decision.new_comp
            if new_comp is not None:
                deep.retract(new_comp)
            trigger = new_comp.trigger if new_comp else (decision.force_deep or "auto")
            cut = shape.drop_to if decision.settled else max(shape.drop_to, deep.last_turn_start(n))
            decision.new_comp = deep.compact(trigger, decision.base_reported, self.turn, cut=cut) or new_comp
            deep.seen()
            shape = self.soft_zone.fit(deep.cut(), n, decision.trigger_level, decision.fast)
        elif decision.due and not decision.settled:
            decision.notes.append(waits)
        return shape

    def _plan_of(self, d: _Decision, shape: Shape) -> Plan:
        p, n = self.policy, d.request.n
        if d.new_comp is not None:   # its figures: the request after it, at no stage
            d.new_comp = replace(d.new_comp, tokens_after=self._request_at_no_stage(n).measured[0])
            self.deep.active[-1].comp = d.new_comp
        failure = self.deep.take_failure()
        if failure:
            d.notes.append(f"summary rejected ({failure}); the extractive summary stands in")
        if shape.drop_to > shape.cut:
            gs = self.index.ledger.group_starts
            kept = bisect.bisect_left(gs, n) - bisect.bisect_left(gs, shape.drop_to)
            d.notes.append(f"shape history kept the last {kept} turn{'' if kept == 1 else 's'}")
        base = d.base_reported
        zone = "safe" if base <= self._soft_limit else ("soft" if base <= self._hard_limit else "hard")
        return Plan(self.turn + 1, n, shape.cut, shape.start, shape.level, shape.near_start, shape.kept_fu,
                    shape.head, self.raw_tokens, base, shape.sent, zone, shape.counted, shape.sent <= p.window,
                    d.zone_counted, shape.sent > self._hard_limit, d.new_comp, {}, d.notes, self.api_tokens,
                    None, shape.lower, shape.boundary, shape.drop_to, shape.joined, None, shape.heuristic,
                    d.recorded, shape.head_heuristic)

    def _finish(self, plan: Plan) -> Plan:
        """The plan completed: its edits counted, built when shaping squeezes it, its cache-stable
        prefix and its tokens without compaction."""
        plan.counts = build.counts(self.index, self.deep, plan)
        if plan.squeeze:
            view = plan.built = self.materialize(plan)
            plan.sent_tokens, plan.counted, plan.fits = view.sent_tokens, view.counted, view.fits
            plan.counts = view.edit_counts()
            plan.sent_heuristic = sum(heuristic_message(m) for m in view.messages)
        calibration, measured = self.meter.calibration, (plan.sent_tokens, plan.counted)
        self.meter.settle(plan)
        if plan.stable_prefix_tokens is None:
            plan.stable_prefix_tokens = self.prefix.tokens(plan, self.index.ledger, self.index.transform, calibration)
        elif (plan.sent_tokens, plan.counted) != measured:   # a short cut's, as a share of the count: of the figure
            plan.stable_prefix_tokens = counted_as_sent(calibration, plan, plan.stable_prefix_heuristic)
        prev = self.prefix.previous
        if prev is not None:   # what of the previous request this one changed: its cache is written again
            plan.rewritten_heuristic = max(0, prev.sent_heuristic - plan.stable_prefix_heuristic)
        if plan.built is not None:
            plan.built = replace(plan.built, stable_prefix_tokens=plan.stable_prefix_tokens,
                                 raw_tokens=plan.raw_tokens, sent_tokens=plan.sent_tokens, counted=plan.counted,
                                 estimated=plan.estimated)
        self.prefix.advance(plan)
        self.gate.planned(plan.turn, plan.stable_prefix_tokens, self.short_cuts.gated)
        return plan

    # -- building the request (core/fold/materialize.py) ---------------------------------------------------
    def materialize(self, plan: Plan) -> View:
        """The messages to send and every edit behind them."""
        return build.materialize(self.index, self.deep, self.meter, plan)

    def count(self, msgs: list[Message]) -> tuple[int, str]:
        """Tokens of a request as this pipeline counts (core/fold/meter.py)."""
        return self.meter.count(msgs)

    def view(self, force_deep: str | None = None) -> tuple[View, Compaction | None]:
        plan = self.plan(force_deep)
        return plan.built or self.materialize(plan), plan.new_compaction

    # -- checkpoints (the replay keeps many; folding from one must not disturb it) ----------------------
    def snapshot(self) -> Pipeline:
        """An independent copy of this state, cheap enough to take every few turns: each part copies
        itself, its containers one level deep (two where they hold mutable ones), and is linked to the
        copies of the parts it reads; messages, edits, plans' parts and other values never changed in
        place are shared, and so are the policy, the summarizer and the counter (its cache maps text
        to a count, the same for every copy)."""
        new = Pipeline.__new__(Pipeline)
        new.__dict__.update(vars(self), san=self.san.snapshot(), triggers=self.triggers.copy(),
                            pin_events=self.pin_events.copy(), prefix=self.prefix.copy(), own=self.own.copy(),
                            gate=self.gate.copy())
        new.index = self.index.copy(new.san)
        new.meter = self.meter.copy(new.index)
        new.deep = self.deep.copy(new.index, new.meter)
        new.frames = self.frames.copy(new.index, new.deep)
        new.soft_zone = self.soft_zone.copy(new.index, new.meter, new.frames)
        new.short_cuts = self.short_cuts.copy(new.index, new.meter, new.soft_zone, new.deep, new.prefix)
        return new
