"""An agent's strategy held against its own record: where a transcript records its agent's automatic
compactions, the agent's preset (core/policy/agents.py) replayed on it should compact at the same
turns (within one) and nowhere else.

Each recorded compaction is predicted from what the agent had then: the transcript with the
compactions before it applied (as the agent sent them) and it and those after taken out, so one
early or late prediction does not move the rest. Manual ones (the transcript marks them) are no
strategy's to predict and are left applied.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from breakwater.core.log.message import Message
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.policy import Policy
from breakwater.core.simulate import simulate
from breakwater.core.stages.deep_compaction import RECORDED

TOLERANCE = 1   # turns either side of the recorded one that count as the same


@dataclass(frozen=True, slots=True)
class Recorded:
    """One compaction the transcript's agent made: the request it applied to, and how it was started."""

    event_id: str
    turn: int
    trigger: str   # the agent's own word: auto, manual, hook, ...


@dataclass
class RecordCheck:
    """Recorded against predicted turns (`predicted[i]` for `recorded[i]`, None: never), and the turns
    where the policy compacts on the transcript as recorded while its agent did not."""

    policy: str
    recorded: list[Recorded] = field(default_factory=list)
    predicted: list[int | None] = field(default_factory=list)
    elsewhere: list[int] = field(default_factory=list)

    @property
    def matched(self) -> int:
        return sum(p is not None and abs(p - r.turn) <= TOLERANCE for r, p in zip(self.recorded, self.predicted))

    @property
    def agrees(self) -> bool:
        return self.matched == len(self.recorded) and not self.elsewhere

    def to_json(self) -> dict:
        return {"policy": self.policy, "recorded": [r.turn for r in self.recorded], "predicted": self.predicted,
                "elsewhere": self.elsewhere, "matched": self.matched, "agrees": self.agrees}


def recorded_compactions(log: SessionLog) -> list[Recorded]:
    """The agent's own compactions, each with the request (turn) it was applied before."""
    out, turn = [], 0
    for e in log.entries:
        if isinstance(e, Message):
            turn += e.role == "assistant"
        elif e.type == "compaction" and e.get("trigger") == RECORDED:
            out.append(Recorded(e.id, turn + 1, str(e.get("original_trigger") or "auto")))
    return out


def without(log: SessionLog, event_ids: set[str]) -> SessionLog:
    """`log` with the compactions named taken out: the messages they replaced stay in the history. The
    usage recorded after the first of them goes too: it was billed for the context the agent had
    compacted, and fitted to the whole history it would scale every later request down."""
    kept, gone = [], False
    for e in log.entries:
        if isinstance(e, Event):
            if e.id in event_ids:
                gone = True
                continue
            if gone and e.type == "usage":
                continue
        kept.append(e)
    return SessionLog(log.header, kept, issues=log.issues, source_format=log.source_format)


def check(log: SessionLog, policy: Policy, counter: str = "exact", model: str | None = None) -> RecordCheck:
    """`policy` on `log` against the automatic compactions the log records (manual ones stay applied)."""
    recorded = recorded_compactions(log)
    auto = [r for r in recorded if r.trigger != "manual"]
    out = RecordCheck(policy.preset, auto)
    previous = 0
    for i, r in enumerate(auto):
        later = {x.event_id for x in auto[i:]}
        decided = [c.turn for c in simulate(without(log, later), policy, counter, model).compactions]
        out.predicted.append(next((t for t in decided if t > previous + TOLERANCE), None))
        previous = r.turn
    near = {t for r in auto for t in range(r.turn - TOLERANCE, r.turn + TOLERANCE + 1)}
    out.elsewhere = [c.turn for c in simulate(log, policy, counter, model).compactions if c.turn not in near]
    return out


__all__ = ["Recorded", "RecordCheck", "TOLERANCE", "check", "recorded_compactions", "without"]
