"""Control by hand (SPEC §10): pin a message, run a stage now, deep compact now, undo.

The same keys work on a recording and in a live chat; only where the event goes differs. On a
recording it goes to the sibling overlay file (never into the recording) at the current turn,
so it shapes that request and the ones after; in a chat the agent logs it and the next request
obeys it. Either way the session is re-simulated at once, so the gauges show the new figure.
The screen provides `record_control(type, data)` and `compact_now()`; this mixin the rest.
"""

from __future__ import annotations

import asyncio

from textual import work
from textual.binding import Binding

from breakwater.core.log.edits import View
from breakwater.core.log.message import Message
from breakwater.core.log.session_log import Event
from breakwater.ui.widgets.message_list import SUMMARY_ROW, MessageList

STAGES = {"snip": "Snip", "mask": "Mask", "microcompact": "Microcompact"}

CONTROL_BINDINGS = [
    Binding("D", "deep_compact", "Deep compact", id="control.deep",
            tooltip="Summarize the history before this request now (you see the summary first)"),
    Binding("P", "pin", "Pin", id="control.pin",
            tooltip="Pin or unpin the selected message: no stage compacts it, deep compactions keep it verbatim"),
    Binding("u", "undo", "Undo", id="control.undo",
            tooltip="Undo the selected summary, else the latest compaction, trigger or pin"),
    Binding("S", "trigger('snip')", "Snip now", show=False, id="control.snip",
            tooltip="Snip long tool results from this request on, whatever the zone"),
    Binding("M", "trigger('mask')", "Mask now", show=False, id="control.mask",
            tooltip="Mask old tool results from this request on, whatever the zone"),
    Binding("C", "trigger('microcompact')", "Microcompact now", show=False, id="control.microcompact",
            tooltip="Reduce old tool exchanges to one line each from this request on"),
]


def undoable(events: list[Event]) -> list[Event]:
    """Compactions, triggers and pins still in force, oldest first (a pin unpinned since is not)."""
    undone = {str(e.get("target")) for e in events if e.type == "undo"}
    live: list[Event] = []
    for e in events:
        if e.type == "unpin":
            live = [p for p in live if not (p.type == "pin" and p.get("message_id") == e.get("message_id"))]
        elif e.type in ("compaction", "trigger", "pin") and e.id not in undone:
            live.append(e)
    return live


def event_turns(entries) -> dict[str, int]:
    """The turn each event of a log (overlay applied) first acts on: one past the assistant
    messages before it."""
    turns: dict[str, int] = {}
    assistants = 0
    for e in entries:
        if isinstance(e, Event):
            turns[e.id] = assistants + 1
        elif getattr(e, "role", None) == "assistant":
            assistants += 1
    return turns


def describe_event(e: Event) -> str:
    if e.type == "compaction":
        return f"deep compaction {e.id} ({e.get('trigger') or 'auto'}, turn {e.get('turn')})"
    if e.type == "trigger":
        return f"{e.get('stage')} triggered by hand ({e.id})"
    if e.type == "undo":
        return f"undo of {e.get('target')} ({e.id})"
    return f"{e.type} of {e.get('message_id')} ({e.id})"


class ControlsMixin:
    """Actions behind CONTROL_BINDINGS; mixed into the replay screen (and so the chat screen)."""

    def record_control(self, type: str, data: dict) -> None:   # pragma: no cover - each screen has its own
        raise NotImplementedError

    def compact_now(self) -> None:   # pragma: no cover
        raise NotImplementedError

    def request_with(self, event: Event) -> View | None:   # pragma: no cover
        """The request at the current turn were `event` recorded there (in a thread)."""
        raise NotImplementedError

    def _selected_message(self) -> Message | None:
        index = self.query_one(MessageList).selected_index
        if index is None or index == SUMMARY_ROW:
            return None
        return self.query_one(MessageList).messages[index]

    def action_pin(self) -> None:
        msg = self._selected_message()
        if msg is None:
            self.notify("Select a message to pin (the summary row cannot be pinned).", severity="warning")
            return
        pinned = msg.id in self.query_one(MessageList).pins
        self.record_control("unpin" if pinned else "pin", {"message_id": msg.id})

    @work(exclusive=True, group="trigger")
    async def action_trigger(self, stage: str) -> None:
        # a stage run by hand is there to make the request smaller: one that would not is not recorded
        turn, shown = self.turn, self.detail.view if self.detail is not None else None
        if shown is not None and shown.turn == turn:
            trial = await asyncio.to_thread(self.request_with, Event("trigger", "trial", {"stage": stage}))
            if trial is not None and trial.sent_tokens >= shown.sent_tokens:
                change = (f"would make the request at turn {turn:,} larger ({shown.sent_tokens:,} → "
                          f"{trial.sent_tokens:,} tokens)" if trial.sent_tokens > shown.sent_tokens else
                          f"would not make the request at turn {turn:,} smaller ({shown.sent_tokens:,} tokens)")
                self.notify(f"{STAGES[stage]} now {change}; nothing was done.", title="Not run", timeout=6)
                return
        self.record_control("trigger", {"stage": stage})

    def action_deep_compact(self) -> None:
        self.compact_now()

    def action_undo(self, target: str | None = None) -> None:
        if target is None:
            lst = self.query_one(MessageList)
            summary = self.detail.summary if self.detail is not None else None
            if lst.selected_index == SUMMARY_ROW and summary is not None and summary.compaction is not None:
                target = summary.compaction.id
        if target is None:
            # the latest edit at or before this turn: one made later in the session is not this
            # request's to take back (u at turn 70 undid a mask made at turn 105)
            turns = event_turns(self.replay.log.entries)
            here = self.turn or 0
            live = [e for e in undoable(self.replay.log.events) if turns.get(e.id, 0) <= here]
            if not live:
                self.notify(f"Nothing to undo at or before turn {here}: no compaction, trigger or pin "
                            f"made there is in force.", severity="warning")
                return
            target = live[-1].id
        self.record_control("undo", {"target": target})

    def undo_commands(self) -> list[tuple[str, str, str]]:
        """(title, help, target) for the palette: one entry per compaction, trigger or pin in force,
        plus the compactions this policy made at or before the current turn."""
        out = [(f"Undo {describe_event(e)}", "Take it back from the current request on", e.id)
               for e in reversed(undoable(self.replay.log.events))]
        recorded = {e.id for e in self.replay.log.events}
        sim = self.replay.simulation
        for comp in reversed(sim.compactions if sim else []):
            if comp.id not in recorded and comp.turn <= (self.turn or 0):
                out.append((f"Undo deep compaction {comp.id} (auto, turn {comp.turn})",
                            "The next request is built without it", comp.id))
        return out
