"""Replay a recorded session under a policy: one plan per turn (SPEC §11 `simulate`).

A turn is one model request: turn k produced the k-th assistant message and its
view is the pipeline run over everything before it.
"""

from __future__ import annotations

import json
import json.encoder
import time
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Collection

from breakwater.core.log.accounting import Calibration, prior_ratio
from breakwater.core.log.prompt_cache import CacheModel, CacheRules, Misses, Prices, RequestCache, cache_rules, timestamp
from breakwater.core.log.edits import View, above_window
from breakwater.core.figures import FIGURE_RULES, money
from breakwater.core.log.message import Message
from breakwater.core.log.models import ModelInfo, counting_model, lookup, named_model
from breakwater.core.fold.cache_worth import CachePricing
from breakwater.core.fold.pipeline import LEVEL_NAMES, Compaction, Pipeline
from breakwater.core.fold.own_request import wanted_for
from breakwater.core.policy import Policy
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.log.tokens import TokenCounter
from breakwater.core.log.visible import json_safe


_string = json.encoder.encode_basestring   # a str as json.dumps(..., ensure_ascii=False) writes it


class _Quoted(dict):
    """The few zone, counting, stage and edit kind names, each quoted once (a lookup, not a call)."""

    def __missing__(self, text: str) -> str:
        quoted = self[text] = _string(text)
        return quoted


_QUOTED = _Quoted()
# consecutive turns mostly share every field but the numbers: the text around them is made once for
# each (zone, counting, zone counting, fits, stage), and for each run of edit kinds, in their order
_AROUND: dict[tuple, tuple[str, str]] = {}
_EDIT_FORMS: dict[tuple[str, ...], str] = {}
_last_edits: list = [(), (), ""]   # the last turn's edit kinds, their counts and their text


def _around(t: "TurnStats") -> tuple[str, str]:
    """The text of `t`'s shared fields either side of stable_prefix_tokens, up to its edits."""
    text = (f'"zone": {_QUOTED[t.zone]}, "counted": {_QUOTED[t.counted]}, "zone_counted": {_QUOTED[t.zone_counted]}, '
            f'"estimated": {"true" if t.estimated else "false"}, '
            f'"fits": {"true" if t.fits else "false"}, "stable_prefix_tokens": ',
            f', "stage": {_QUOTED[t.level]}, "edits": {{')
    _AROUND[t.zone, t.counted, t.zone_counted, t.estimated, t.fits, t.level] = text
    return text


def _edit_form(kinds: tuple[str, ...]) -> str:
    """A %-format of the edits of these kinds, in this order, for their counts."""
    if len(_EDIT_FORMS) > 256:
        _EDIT_FORMS.clear()
    form = _EDIT_FORMS[kinds] = ", ".join(_QUOTED[k].replace("%", "%%") + ": %d" for k in kinds)
    return form


# Not frozen, for the reason Message is not: a frozen dataclass sets each field through
# object.__setattr__, and a simulation builds one per request (half a million on a long session).
@dataclass(slots=True, unsafe_hash=True)
class TurnStats:
    turn: int
    message_id: str
    raw_tokens: int
    base_tokens: int
    sent_tokens: int
    zone: str
    counted: str
    zone_counted: str
    level: str
    edits: dict[str, int]
    api_tokens: int | None = None
    compaction: str | None = None
    recorded_compaction: str | None = None   # from the log (its agent's), applied right before this request
    fits: bool = True
    stable_prefix_tokens: int = 0
    compaction_source: str | None = None    # "recorded" (from the log) or "decided" (by this run)
    # what the provider billed for this very request, when the transcript records it (eval compares)
    billed_tokens: int | None = None
    billed_cached: int | None = None
    # USD of the input at the model's prices, through the provider's cache (core/log/prompt_cache.py)
    cost_raw: float | None = None
    cost_sent: float | None = None
    # the request sent and the one without compaction against the provider's cache (reads, writes,
    # the re-write a compaction caused); what the provider recorded it wrote, where it did
    cache: RequestCache | None = None
    cache_raw: RequestCache | None = None
    billed_cache_write: int | None = None
    recorded_over_window: bool = False   # the provider billed more than the window in use (issue 36)
    estimated: bool = True   # the figure is the heuristic's line, whichever count decided (Plan.estimated)

    def to_json(self) -> dict[str, Any]:
        out = {"turn": self.turn, "message_id": self.message_id, "raw_tokens": self.raw_tokens,
               "base_tokens": self.base_tokens, "sent_tokens": self.sent_tokens, "zone": self.zone,
               "counted": self.counted, "zone_counted": self.zone_counted, "estimated": self.estimated,
               "fits": self.fits,
               "stable_prefix_tokens": self.stable_prefix_tokens, "stage": self.level, "edits": dict(self.edits)}
        if self.api_tokens is not None:
            out["api_tokens"] = self.api_tokens
        if self.compaction:
            out["compaction"] = self.compaction
            out["compaction_source"] = self.compaction_source
        if self.recorded_compaction:
            out["recorded_compaction"] = self.recorded_compaction
        if self.billed_tokens is not None:
            out["billed_tokens"] = self.billed_tokens
            if self.billed_cached is not None:
                out["billed_cached"] = self.billed_cached
            if self.billed_cache_write is not None:
                out["billed_cache_write"] = self.billed_cache_write
            if self.recorded_over_window:
                out["recorded_over_window"] = True
        if self.cost_sent is not None:
            out["cost_raw"], out["cost_sent"] = self.cost_raw, self.cost_sent
        if self.cache is not None:
            out["cache"] = self.cache.to_json()
            out["cache_raw"] = self.cache_raw.to_json()
        return out

    def json_text(self) -> str:
        """`json.dumps(self.to_json(), ensure_ascii=False)`, built directly: several times faster, and
        `simulate --json` writes one per request (the test suite holds the two to the same text)."""
        around = _AROUND.get((self.zone, self.counted, self.zone_counted, self.estimated, self.fits, self.level)) \
            or _around(self)
        edits = self.edits
        kinds, counts = tuple(edits), tuple(edits.values())
        last = _last_edits
        if counts == last[1] and kinds == last[0]:   # a long chat's turns mostly repeat them
            edited = last[2]
        else:
            form = _EDIT_FORMS.get(kinds)
            if form is None:
                form = _edit_form(kinds)
            edited = form % counts
            last[:] = kinds, counts, edited
        text = (f'{{"turn": {self.turn}, "message_id": {_string(self.message_id)}, "raw_tokens": {self.raw_tokens}, '
                f'"base_tokens": {self.base_tokens}, "sent_tokens": {self.sent_tokens}, '
                f'{around[0]}{self.stable_prefix_tokens}{around[1]}{edited}}}')
        # the rest as to_json orders it, each value as json.dumps writes it
        if self.api_tokens is not None:
            text += f', "api_tokens": {_number(self.api_tokens)}'
        if self.compaction:
            text += f', "compaction": {_value(self.compaction)}, "compaction_source": {_value(self.compaction_source)}'
        if self.recorded_compaction:
            text += f', "recorded_compaction": {_value(self.recorded_compaction)}'
        if self.billed_tokens is not None:
            text += f', "billed_tokens": {_number(self.billed_tokens)}'
            if self.billed_cached is not None:
                text += f', "billed_cached": {_number(self.billed_cached)}'
            if self.billed_cache_write is not None:
                text += f', "billed_cache_write": {_number(self.billed_cache_write)}'
            if self.recorded_over_window:
                text += ', "recorded_over_window": true'
        if self.cost_sent is not None:
            text += f', "cost_raw": {_number(self.cost_raw)}, "cost_sent": {_number(self.cost_sent)}'
        if self.cache is not None:
            text += f', "cache": {_cache_text(self.cache)}, "cache_raw": {_cache_text(self.cache_raw)}'
        return text + "}"


def _number(value: Any) -> str:
    """`value` as json.dumps writes it: an int or a finite float by its repr (as the encoder does), else
    the encoder itself (a bool, NaN, None)."""
    kind = type(value)
    if kind is int or (kind is float and value - value == 0.0):
        return repr(value)
    return json.dumps(value)


def _value(value: Any) -> str:
    """A string as json.dumps(..., ensure_ascii=False) writes it; anything else through json.dumps."""
    return _string(value) if type(value) is str else json.dumps(value, ensure_ascii=False)


def _cache_text(cache: RequestCache) -> str:
    """`json.dumps(cache.to_json())`, built directly (one per request, twice)."""
    text = f'{{"read": {_number(cache.read)}, "write": {_number(cache.write)}'
    if cache.rewritten:
        text += f', "rewritten": {_number(cache.rewritten)}, "rewrite_cost": {_number(round(cache.rewrite_cost, 6))}'
    if cache.expired:
        text += ', "expired": true'
    return text + "}"


@dataclass(frozen=True, slots=True)
class ProviderFigure:
    """The provider's own count of a request, as every screen shows it (37.10: the gauge showed the
    request before's, the session list the file's last, for the same session): the request's own when
    its transcript records what was billed for it, else the latest reported before it, with its turn."""

    tokens: int
    turn: int | None       # the request the provider reported it for
    above_window: bool     # above the window the request shown is planned under
    own: bool              # reported for the request shown


def provider_figure(view: View, stats: TurnStats | None) -> ProviderFigure | None:
    if stats is not None and stats.billed_tokens is not None:
        return ProviderFigure(stats.billed_tokens, view.turn, above_window(stats.billed_tokens, view.window), True)
    if view.api_tokens is None:
        return None
    return ProviderFigure(view.api_tokens, view.api_turn, view.api_above_window, view.api_turn == view.turn)


@dataclass
class Simulation:
    policy: Policy
    counter: str
    encoding: str | None
    turns: list[TurnStats] = field(default_factory=list)   # empty when `simulate(on_turn=...)` took them
    compactions: list[Compaction] = field(default_factory=list)   # decided by this run
    # the log's compactions applied, less those undone before any request and those after the last
    # request (they shaped none: eval, which counts the summaries requests carry, never sees them)
    recorded: list[str] = field(default_factory=list)
    seconds: float = 0.0
    views: dict[int, View] = field(default_factory=dict)  # the requests asked for, by turn
    # totals over every turn, kept as they go so that a simulation need not keep its turns
    turn_count: int = 0
    billed_raw: int = 0
    billed_sent: int = 0
    billed_sent_estimated: bool = False   # any turn's sent_tokens an estimate: the sum is one too
    over_window: list[TurnStats] = field(default_factory=list)
    compaction_turns: list[int] = field(default_factory=list)   # turns with a compaction, decided or recorded
    model: str | None = None            # the model named (--model, the session's), whose window and tokenizer
    window_source: str = "policy"       # where the window came from (core/log/models.py)
    calibration: Calibration = field(default_factory=Calibration)   # the fit in force after the last request
    prices: ModelInfo | None = None     # the model's, when known: costs in USD
    cache_rules: CacheRules | None = None   # the provider's (core/log/prompt_cache.py)
    cache_misses: Misses | None = None      # its misses, fitted from the recorded cache reads
    cost_raw: float = 0.0
    cost_sent: float = 0.0
    cache_rewritten: int = 0            # cached tokens the compactions made the provider write again
    cache_rewrite_cost: float = 0.0     # and what that cost beyond reading them (USD)

    def add(self, t: TurnStats, keep: bool = True) -> None:
        if keep:
            self.turns.append(t)
        self.turn_count += 1
        self.billed_raw += t.raw_tokens
        self.billed_sent += t.sent_tokens
        if t.estimated:
            self.billed_sent_estimated = True
        if t.cache is not None:
            self.cache_rewritten += t.cache.rewritten
            self.cache_rewrite_cost += t.cache.rewrite_cost
            if t.cache.cost is not None:
                t.cost_raw, t.cost_sent = round(t.cache_raw.cost, 6), round(t.cache.cost, 6)
                self.cost_raw += t.cost_raw
                self.cost_sent += t.cost_sent
        if not t.fits:
            self.over_window.append(t)
        if t.compaction:
            self.compaction_turns.append(t.turn)

    @property
    def saved(self) -> int:
        return self.billed_raw - self.billed_sent

    def cost_note(self) -> str | None:
        """Why compaction cost more than it saved, when it did (issue 36): the cache re-writes it caused.
        One sentence, for simulate --json."""
        if not self.costs_more:
            return None
        return (f"compaction costs {money(self.cost_sent - self.cost_raw)} more than it saves: each one changes the "
                f"cached history, which the provider writes again ({self.cache_rewritten:,} tokens, "
                f"{money(self.cache_rewrite_cost)} more than reading them)")

    @property
    def costs_more(self) -> bool:
        """Compaction costs more than it saves, in money (the cache it re-wrote)."""
        return self.prices is not None and self.cost_sent > self.cost_raw

    def cache_note(self) -> str | None:
        """The cache re-writes compaction caused, in a line the timeline and A/B show as it is, saying first
        when compaction costs more than it saves (`cost_note`'s case); None: no prices, or nothing re-written."""
        if self.prices is None or not self.cache_rewritten:
            return None
        wrote = f"{self.cache_rewritten:,} cached tokens (+{money(self.cache_rewrite_cost)} over reading them)"
        if self.costs_more:
            return f"compaction costs {money(self.cost_sent - self.cost_raw)} more than it saves: it re-wrote {wrote}"
        return f"compaction re-wrote {wrote}"

    def header_json(self) -> dict[str, Any]:
        p = self.policy
        prices = self.prices
        priced = None if prices is None else {"model": prices.name, "source": prices.source, "input": prices.input,
                                              "cache_read": prices.cache_read, "cache_write": prices.cache_write}
        return {"model": self.model, "prices_per_mtok": priced,
                **({} if self.cache_rules is None else {"cache_rules": self.cache_rules.to_json()}),
                "window": p.window, "window_source": self.window_source,
                "soft_limit": p.soft_limit, "hard_limit": p.hard_limit, "preset": p.preset,
                "counter": self.counter, "encoding": self.encoding, "counting": FIGURE_RULES}

    def totals_json(self) -> dict[str, Any]:
        return {"billed_raw": self.billed_raw, "billed_sent": self.billed_sent,
                "billed_sent_estimated": self.billed_sent_estimated, "saved": self.saved,
                "calibration": self.calibration.to_json(),
                **({} if self.prices is None else {"cost_raw": round(self.cost_raw, 6), "cost_sent": round(self.cost_sent, 6),
                                                   "cost_saved": round(self.cost_raw - self.cost_sent, 6)}),
                **({} if self.cost_note() is None else {"cost_note": self.cost_note()}),
                **({} if self.cache_rules is None else {"cache_rewritten": self.cache_rewritten,
                                                        "cache_rewrite_cost": round(self.cache_rewrite_cost, 6),
                                                        "cache_misses": self.cache_misses.to_json()}),
                "compactions": len(self.compactions) + len(self.recorded),
                "recorded_compactions": len(self.recorded), "decided_compactions": len(self.compactions),
                "over_window": len(self.over_window), "turns": self.turn_count}

    def to_json(self) -> dict[str, Any]:
        return {**self.header_json(), "turns": [t.to_json() for t in self.turns], "totals": self.totals_json()}


class JsonWriter:
    """`json.dumps(simulation.to_json(), ensure_ascii=False)`, written a batch of turns at a time as
    `simulate` hands them over (its `on_turn`), so that the turns of a long session never sit in
    memory. Every write is a whole batch (the last one with the totals), as `print` wrote the whole
    object: a write that fails (a full disk) fails in the command and leaves nothing buffered."""

    BATCH = 256   # turns per write: few writes (~500 bytes a turn), a bounded amount in memory

    def __init__(self, fh: IO[str]):
        self.fh = fh
        self.started = False
        self.pending: list[str] = []

    def turn(self, sim: Simulation, t: TurnStats) -> None:
        self.pending.append(t.json_text())
        if len(self.pending) >= 2 * self.BATCH:   # the last write keeps a whole batch too
            self._write(sim, self.pending[:self.BATCH])
            del self.pending[:self.BATCH]

    def finish(self, sim: Simulation, more: dict[str, Any] | None = None) -> None:
        """The rest of the object: the totals, then `more`'s keys."""
        tail = {"totals": sim.totals_json(), **(more or {})}
        self._write(sim, self.pending, "], " + json.dumps(tail, ensure_ascii=False)[1:] + "\n")
        self.pending.clear()
        self.fh.flush()

    def _write(self, sim: Simulation, items: list[str], end: str = "") -> None:
        text = ", ".join(items)   # as json.dumps separates the items of a list
        if not self.started:
            self.started = True
            text = json.dumps(sim.header_json(), ensure_ascii=False)[:-1] + ', "turns": [' + text
        elif text:
            text = ", " + text
        self.fh.write(json_safe(text + end))   # printed for a terminal: no C1 control raw


def make_pipeline(log: SessionLog, policy: Policy, counter: str = "exact", model: str | None = None,
                  summarizer=None, tokens: TokenCounter | None = None) -> Pipeline:
    """`tokens`: a counter to reuse (its cache of exact counts), else a new one for `counter`. The counter
    loads its tokenizer (~0.3 s) at its first exact count: a session never near a limit needs none."""
    tc = tokens or token_counter(log, counter, model)
    pipe = Pipeline(policy, tc, mode=counter, summarizer=summarizer, own_usage=wanted_for(log.entries),
                    cache_pricing=CachePricing.of_session(log.header, model))
    pipe.meter.calibration.prior = prior_ratio(named_model(log.header, model))
    return pipe


def token_counter(log: SessionLog, counter: str = "exact", model: str | None = None) -> TokenCounter:
    """The counter for `counter`: with "exact", the tokenizer of the model `counting_model` names."""
    return TokenCounter.for_model(counting_model(log.header, model)) if counter == "exact" else TokenCounter(None)


def simulate(log: SessionLog, policy: Policy, counter: str = "exact", model: str | None = None,
             summarizer=None, until_turn: int | None = None, views: Collection[int] = (),
             before_turn: Callable[[Pipeline, int], None] | None = None,
             tokens: TokenCounter | None = None,
             on_turn: Callable[[Simulation, TurnStats], None] | None = None,
             window_source: str = "policy", after_plan: Callable[[Pipeline, Any], None] | None = None) -> Simulation:
    """One plan per turn; the full request (messages and edits) only for the turns in `views`.
    `before_turn(pipeline, i)` is called before each request is planned, `i` being the index in
    `log.entries` of the assistant message that request produced (replay keeps checkpoints).
    `on_turn(simulation, turn)` takes each turn's figures instead of `simulation.turns`; a turn is
    handed over once what the provider billed for it (the usage event after its reply) is known.
    `window_source`: where the policy's window came from (core/log/models.py `resolve_window`).
    `after_plan(pipeline, plan)` sees each request's plan as it is made (eval scores it: one pass
    gives the replay's figures and the money)."""
    pipe = make_pipeline(log, policy, counter, model, summarizer, tokens)
    named = named_model(log.header, model)
    info = lookup(named) if named else None
    sim = Simulation(policy, pipe.mode, pipe.counter.encoding_name, model=named, window_source=window_source,
                     calibration=pipe.calibration, prices=info if info is not None and info.input is not None else None)
    keep, feed = on_turn is None, pipe.feed
    shaped: set[str] = set()   # the log's compactions some request was built with
    pending: TurnStats | None = None
    caches = cache_models(sim, log.header.get("provider"))
    same = True   # the last request sent was the one without compaction: its cache is the same
    raw_h = 0     # the whole log at the last request, by the heuristic: the request without compaction then
    sent_at: Any = None   # the latest time a message before the next request states: when it was sent
    unsent: list[str] = []   # the log's compactions since the last request
    after_user = False       # a user message since the last request (the cache misses more then)

    def hand_over() -> None:
        sim.add(pending, keep)
        if not keep:
            on_turn(sim, pending)

    t0 = time.perf_counter()
    for i, entry in enumerate(log.entries):
        if isinstance(entry, Event):
            feed(entry)
            if entry.type == "compaction" and pipe.applied(entry.id):
                sim.recorded.append(entry.id)
                unsent.append(entry.id)
            elif entry.type == "undo" and entry.get("target") in sim.recorded and entry.get("target") not in shaped:
                sim.recorded.remove(entry.get("target"))   # taken back before any request: it never happened
            elif entry.type == "usage" and pending is not None and entry.get("turn") == pending.turn:
                billed, cached = entry.get("prompt_tokens"), entry.get("cached_tokens")
                written = entry.get("cache_write_tokens")
                pending.billed_tokens = billed if isinstance(billed, int) else None
                pending.billed_cached = cached if isinstance(cached, int) else None
                pending.billed_cache_write = written if isinstance(written, int) else None
                pending.recorded_over_window = isinstance(billed, int) and above_window(billed, pipe.policy.window)
                if caches is not None and isinstance(billed, int):   # the provider's misses, as they happened
                    # to the request the transcript records (without compaction), whatever this policy sends:
                    # measured against the request sent, the miss rate and so the cost without compaction
                    # moved with the policy (long-refactor at 32,000: $61.65 under seed-000, $60.56 under seed-001)
                    c = pending.cache_raw
                    caches[0].misses.observe(c.reusable, pending.billed_cached, c.cold, c.after_user)
                    output = entry.get("completion_tokens")
                    if isinstance(output, int):
                        for model in caches:
                            model.replied(output)
            continue
        if entry.role == "assistant":
            if pending is not None:
                hand_over()
                pending = None
            if until_turn is not None and pipe.turn + 1 > until_turn:
                break
            if before_turn is not None:
                before_turn(pipe, i)
            plan = pipe.plan()
            if after_plan is not None:
                after_plan(pipe, plan)
            unsent.clear()
            if plan.turn in views:
                sim.views[plan.turn] = plan.built or pipe.materialize(plan)
            comp, source = plan.new_compaction, "decided"
            if plan.new_compaction:
                sim.compactions.append(plan.new_compaction)
            recorded = plan.recorded_compaction
            if recorded:
                shaped.add(recorded.id)
                if comp is None:
                    comp, source = recorded, "recorded"
            stats = TurnStats(plan.turn, entry.id, plan.raw_tokens, plan.base_tokens, plan.sent_tokens,
                              plan.zone, plan.counted, plan.zone_counted, LEVEL_NAMES[plan.level], plan.counts,
                              plan.api_tokens, comp.id if comp else None,
                              recorded.id if recorded else None, plan.fits, plan.stable_prefix_tokens,
                              source if comp else None, estimated=plan.estimated)
            if caches is not None:
                same = through_cache(caches, stats, plan, pipe.calibration, sent_at or entry_time(entry), same, raw_h,
                                     after_user)
            after_user = False
            raw_h = pipe.raw_tokens
            pending = stats
        if caches is not None:
            sent_at = entry_time(entry) or sent_at
            after_user = after_user or entry.role == "user"
        feed(entry)
    if pending is not None:
        hand_over()
    if until_turn is None:
        sim.recorded = [c for c in sim.recorded if c not in unsent]
    sim.calibration = pipe.calibration
    sim.seconds = time.perf_counter() - t0
    return sim


def cache_models(sim: Simulation, provider: object = None) -> tuple[CacheModel, CacheModel] | None:
    """The provider's cache as the requests without compaction and with it meet it; None when the session
    names no model (its provider unknown)."""
    if sim.model is None:
        return None
    rules = sim.cache_rules = cache_rules(sim.model, provider if isinstance(provider, str) else None)
    prices = Prices.of(sim.prices, rules) if sim.prices is not None else None
    misses = sim.cache_misses = Misses()   # one provider: one miss rate for both
    return CacheModel(rules, prices, misses), CacheModel(rules, prices, misses)


def entry_time(msg: Message) -> float | None:
    return timestamp(msg.meta.get("ts")) if msg.meta else None


def through_cache(caches: tuple[CacheModel, CacheModel], stats: TurnStats, plan, calibration: Calibration,
                  at: float | None, same: bool, raw_h: int, after_user: bool = False) -> bool:
    """The turn's requests against the cache (core/log/prompt_cache.py), sent at `at` (the time of the last
    message before it: a reply's own is when it ended, a long reply later than the request): without
    compaction each request extends the last one; with it, its cache-stable prefix is reused and what it
    changed of the last one is written again. Where both requests are the same, now and at the last
    turn, they are one request and cost the same (issue 36: no different cost where nothing was saved).
    Returns whether they were the same. `raw_h`: the whole log at the last request, by the heuristic."""
    raw, sent = caches
    prefix = min(stats.raw_tokens, calibration.apply(raw_h))
    stats.cache_raw = raw.request(stats.raw_tokens, prefix, at, after_user=after_user)
    now = stats.sent_tokens == stats.raw_tokens
    if now and same:   # the same request: the same figures (the model of the requests sent follows it too)
        sent.request(stats.raw_tokens, prefix, at, after_user=after_user)
        stats.cache = stats.cache_raw
    else:
        stats.cache = sent.request(stats.sent_tokens, stats.stable_prefix_tokens, at,
                                   calibration.scale(plan.rewritten_heuristic), after_user)
    return now


def pipeline_at(log: SessionLog, policy: Policy, turn: int, counter: str = "exact", model: str | None = None,
                summarizer=None) -> Pipeline:
    """The pipeline fed everything before request `turn` (1-based), each earlier request planned."""
    pipe = make_pipeline(log, policy, counter, model, summarizer)
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            if pipe.turn + 1 == turn:
                break
            pipe.plan()
        pipe.feed(entry)
    return pipe


def view_at(log: SessionLog, policy: Policy, turn: int, counter: str = "exact", model: str | None = None,
            summarizer=None) -> View:
    """The exact request of turn `turn` (1-based); past the last turn: the next request."""
    view, _ = pipeline_at(log, policy, turn, counter, model, summarizer).view()
    return view
