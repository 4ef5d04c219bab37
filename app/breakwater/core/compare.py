"""A/B: two policies over the same session, and where their requests differ.

A comparison is exactly two simulations (plus building the one request per side whose
messages are compared); everything else is arithmetic over their per-turn figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from breakwater.core.log.edits import Edit, View
from breakwater.core.policy import PRESETS, Policy, preset
from breakwater.core.policy.agents import agent_of
from breakwater.core.log.session_log import SessionLog
from breakwater.core.simulate import Simulation, TurnStats, simulate, token_counter


@dataclass(frozen=True, slots=True)
class Totals:
    """The wallet of one simulation (seed 000): what the whole session bills, with and without compaction."""

    billed_raw: int
    billed_sent: int
    saved: int   # billed_raw - billed_sent, as Simulation.saved counts it
    compactions: int
    hard_turns: int
    turns: int
    billed_sent_estimated: bool   # any turn's sent figure an estimate
    cost_raw: float | None = None        # USD through the prompt cache, without and with compaction (None: no prices)
    cost_sent: float | None = None
    cache_rewritten: int = 0             # cached tokens the compactions made the provider write again
    cache_rewrite_cost: float = 0.0      # and what that cost beyond reading them (USD)

    @property
    def saved_pct(self) -> float:
        return 100 * self.saved / self.billed_raw if self.billed_raw else 0.0

    @classmethod
    def of(cls, sim: Simulation) -> "Totals":
        priced = sim.prices is not None
        return cls(sim.billed_raw, sim.billed_sent, sim.saved, len(sim.compactions),
                   sum(1 for t in sim.turns if t.zone == "hard"), len(sim.turns), sim.billed_sent_estimated,
                   sim.cost_raw if priced else None, sim.cost_sent if priced else None,
                   sim.cache_rewritten, sim.cache_rewrite_cost)

    def to_json(self) -> dict[str, Any]:
        return {"billed_raw": self.billed_raw, "billed_sent": self.billed_sent,
                "billed_sent_estimated": self.billed_sent_estimated, "saved": self.saved, "compactions": self.compactions, "hard_turns": self.hard_turns, "turns": self.turns,
                **({} if self.cost_raw is None else {
                    "cost_raw": round(self.cost_raw, 6), "cost_sent": round(self.cost_sent, 6),
                    "cache_rewritten": self.cache_rewritten, "cache_rewrite_cost": round(self.cache_rewrite_cost, 6)})}


@dataclass(frozen=True, slots=True)
class TurnDiff:
    turn: int
    a: TurnStats
    b: TurnStats

    @property
    def delta(self) -> int:
        """B's sent tokens minus A's: negative when B sends less."""
        return self.b.sent_tokens - self.a.sent_tokens

    @property
    def differs(self) -> bool:
        a, b = self.a, self.b
        return (a.sent_tokens, a.zone, a.level, a.edits, bool(a.compaction)) != \
               (b.sent_tokens, b.zone, b.level, b.edits, bool(b.compaction))

    def to_json(self) -> dict[str, Any]:
        a, b = self.a, self.b
        out = {"turn": self.turn, "sent_a": a.sent_tokens, "sent_b": b.sent_tokens, "delta": self.delta,
               "zone_a": a.zone, "zone_b": b.zone, "stage_a": a.level, "stage_b": b.level}
        if a.edits != b.edits:
            out["edits_a"], out["edits_b"] = dict(a.edits), dict(b.edits)
        if a.compaction or b.compaction:
            out["compaction_a"], out["compaction_b"] = a.compaction, b.compaction
        return out


@dataclass(frozen=True, slots=True)
class MessageDiff:
    """One message of the log whose edits are not the same in A's and B's request."""

    message_id: str
    a: tuple[Edit, ...]
    b: tuple[Edit, ...]

    @staticmethod
    def kinds(edits: tuple[Edit, ...]) -> list[str]:
        return [e.kind for e in edits]

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "a": self.kinds(self.a), "b": self.kinds(self.b),
                "tokens_a": _tokens_after(self.a), "tokens_b": _tokens_after(self.b)}


def _tokens_after(edits: tuple[Edit, ...]) -> int | None:
    """Tokens the message is sent with once its last edit applied; None when it is sent as logged."""
    return edits[-1].tokens_after if edits else None


def _by_message(view: View) -> dict[str, tuple[Edit, ...]]:
    out: dict[str, list[Edit]] = {}
    for e in view.edits:
        out.setdefault(e.message_id, []).append(e)
    return {k: tuple(v) for k, v in out.items()}


def _signature(edits: tuple[Edit, ...]) -> tuple:
    return tuple((e.kind, e.stage, e.spans, e.tokens_after) for e in edits)


def message_diffs(a: View, b: View) -> list[MessageDiff]:
    """Messages edited differently in two requests of the same turn, in A's order then B's."""
    ea, eb = _by_message(a), _by_message(b)
    ids = list(ea) + [m for m in eb if m not in ea]
    return [MessageDiff(m, ea.get(m, ()), eb.get(m, ())) for m in ids
            if _signature(ea.get(m, ())) != _signature(eb.get(m, ()))]


@dataclass
class Comparison:
    a: Simulation
    b: Simulation
    turn: int | None = None   # the turn whose requests `messages` compares

    @property
    def turns(self) -> list[TurnDiff]:
        return [TurnDiff(ta.turn, ta, tb) for ta, tb in zip(self.a.turns, self.b.turns)]

    @property
    def totals(self) -> tuple[Totals, Totals]:
        return Totals.of(self.a), Totals.of(self.b)

    @property
    def messages(self) -> list[MessageDiff]:
        if self.turn is None or self.turn not in self.a.views or self.turn not in self.b.views:
            return []
        return message_diffs(self.a.views[self.turn], self.b.views[self.turn])

    def to_json(self) -> dict[str, Any]:
        ta, tb = self.totals
        return {
            "a": self.a.to_json(), "b": self.b.to_json(),
            "diff": {
                "totals": {"a": ta.to_json(), "b": tb.to_json(),
                           "billed_sent_delta": tb.billed_sent - ta.billed_sent,
                           "compactions_delta": tb.compactions - ta.compactions,
                           "hard_turns_delta": tb.hard_turns - ta.hard_turns,
                           "turns_differing": sum(1 for t in self.turns if t.differs)},
                "turns": [t.to_json() for t in self.turns],
                "messages": {"turn": self.turn, "differ": [m.to_json() for m in self.messages]},
            },
        }


def counterpart(policy: Policy, header: Mapping[str, Any] | None = None) -> Policy:
    """What to hold `policy` against by default, at its window: on the transcript of a known agent
    (`header`, the log's) that agent's own strategy ("your agent today"), unless `policy` is it; else
    its own preset when it was edited, else the next preset."""
    window = policy.window
    agent = agent_of(header or {})
    if agent is not None and policy.preset != agent:
        return preset(agent).with_changes(window=window)
    own = PRESETS.get(policy.preset, Policy()).with_changes(window=window)
    if own != policy:
        return own
    names = list(PRESETS)
    nxt = names[(names.index(policy.preset) + 1) % len(names)] if policy.preset in names else names[0]
    return PRESETS[nxt].with_changes(window=window)


def compare(log: SessionLog, a: Policy, b: Policy, counter: str = "exact", model: str | None = None,
            turn: int | None = None, window_sources: tuple[str, str] = ("policy", "policy")) -> Comparison:
    """Simulate `log` under `a` and `b`; compare the requests of `turn` (default: the last turn).
    `window_sources`: where each policy's window came from (core/log/models.py)."""
    if turn is None:
        turn = log.turn_count() or None
    wanted = (turn,) if turn else ()
    tokens = token_counter(log, counter, model)   # B counts again only what A never sent
    return Comparison(simulate(log, a, counter, model, views=wanted, tokens=tokens, window_source=window_sources[0]),
                      simulate(log, b, counter, model, views=wanted, tokens=tokens, window_source=window_sources[1]),
                      turn)


__all__ = ["Comparison", "MessageDiff", "Totals", "TurnDiff", "compare", "counterpart", "message_diffs"]
