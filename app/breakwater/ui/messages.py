"""Messages workers post to the app; `@on` handlers own the state, workers never touch widgets."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from breakwater.core.replay import Replay, TurnDetail
from breakwater.core.simulate import Simulation, TurnStats


@dataclass
class SimulationProgress(Message):
    """The one pass over the log got this far (coalesced: only the latest matters)."""

    turn: int
    total: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SimulationProgress)


@dataclass
class SimulationReady(Message):
    simulation: Simulation
    detail: TurnDetail   # the request of the turn to show, built in the same pass


@dataclass
class FirstLook(Message):
    """The request of the turn to show by the heuristic counter, drawn while the exact pass of `replay`
    (the screen's, when it was posted) still runs: the first screen does not wait for tiktoken."""

    replay: Replay
    detail: TurnDetail
    stats: TurnStats | None


@dataclass
class SimulationFailed(Message):
    reason: str


@dataclass
class ViewReady(Message):
    """The request of one turn, with its counts, ready to draw."""

    turn: int
    detail: TurnDetail


@dataclass
class TurnChosen(Message):
    """A widget (timeline click, summary jump) asks for another turn."""

    turn: int


@dataclass
class MessageChosen(Message):
    """A widget asks to select a log message by id (e.g. a message a summary covers)."""

    message_id: str
