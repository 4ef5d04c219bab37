"""`breakwater replay FILE --follow`: the replay screen on a transcript its agent is still writing.

Each write the agent makes (watchfiles) is read by the `Follower` (formats/follow.py): what is
complete becomes the session shown, re-simulated under the user's policy, and the gauges and the
timeline grow with it. The view stays at the latest turn unless the user stepped away (End follows
again). A line under the gauges says how close the agent is to its own auto-compaction and what the
user's policy does at this turn.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Static

from breakwater.core.log.json_lines import SessionLogError
from breakwater.core.log.visible import visible
from breakwater.core.replay import Replay, TurnDetail
from breakwater.core.simulate import provider_figure
from breakwater.core.log.session_log import SessionLog
from breakwater.formats.follow import REPLACED, Follower, OwnCompaction, own_compaction
from breakwater.ui.screens.replay import ReplayScreen
from breakwater.ui.widgets.message_list import MessageList

WATCH_STEP_MS = 10   # how often watchfiles looks for more changes once one came; a line shows in ~1/20 s


class FollowScreen(ReplayScreen):
    DEFAULT_CSS = ("FollowScreen #follow-status { height: 2; padding: 0 1; background: $surface; color: $text; "
                   "text-wrap: nowrap; text-overflow: ellipsis; }")
    BINDINGS = [
        Binding("F", "toggle_follow", "Follow", id="follow.toggle",
                tooltip="Stay at the newest turn as the agent writes (End does too; stepping back stops it)"),
    ]

    def __init__(self, replay: Replay, follower: Follower, **kw):
        super().__init__(replay, **kw)
        self.follower = follower
        self.follow = True
        self.appended = 0          # times the file grew while shown
        self.said_change: str | None = None   # the last replacement or truncation, for the status line
        self._unwatch = asyncio.Event()

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, Footer):
                yield Static(id="follow-status")
            yield widget

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()   # the replay screen's own on_mount runs once, here, before ours
        super().on_mount()
        self._status()
        self._watch()

    def on_unmount(self) -> None:
        self._unwatch.set()
        self.follower.close()

    # -- the file ----------------------------------------------------------------------------------
    @work(exclusive=True, group="follow")
    async def _watch(self) -> None:
        from watchfiles import awatch

        path = self.follower.path
        name = path.name
        await self._read()   # what was written between the first read and the watch starting
        async for _ in awatch(path.parent, watch_filter=lambda _change, p: Path(p).name == name,
                              debounce=WATCH_STEP_MS * 5, step=WATCH_STEP_MS, recursive=False,
                              stop_event=self._unwatch):
            await self._read()

    async def _read(self) -> None:
        try:
            log = await asyncio.to_thread(self.follower.read)
        except SessionLogError as exc:
            self.notify(visible(str(exc)), title="The transcript could not be read", severity="error", timeout=10)
            return
        changed = self.follower.changes()   # replaced, truncated, refused, gone (formats/follow.py)
        for change in changed:
            self.said_change = visible(change.message)
            self.notify(visible(change.message), title=f"Transcript {change.kind}", severity="warning", timeout=10)
        # compared whole, not counted: the lines of one Claude Code reply (thinking, text, each call)
        # grow its one message, and a count waited for the tool result to show them (37.5)
        if log is not None and (changed or log.entries != self.recording.entries):
            self._grew(log, fresh=any(c.kind == REPLACED for c in changed))
        self._status()

    def _grew(self, log: SessionLog, fresh: bool = False) -> None:
        r = self.replay
        self.appended += 1
        self.recording = log
        # the user's pins, triggers and undos (the overlay) on top of what the agent wrote, as on any
        # recording; another file under the name: its own model, not the one the old file named
        shown = self.overlay.apply(log) if self.overlay is not None else log
        self.reload(Replay(shown, r.policy, r.counter, None if fresh else r.model, r.summarizer, recording=log,
                           tokens=None if fresh else r.tokens, window_source=r.window_source))
        if self.follow and self.messages:
            self.query_one(MessageList).select_index(len(self.messages) - 1)   # the newest in view

    # -- staying at the latest turn -----------------------------------------------------------------
    def turn_to_show(self, turns: int) -> int:
        return max(1, turns) if self.follow else super().turn_to_show(turns)

    def action_step(self, delta: int) -> None:
        self.follow = False
        super().action_step(delta)
        self._status()

    def action_jump(self, where: str) -> None:
        self.follow = where == "last"
        super().action_jump(where)
        self._status()

    def action_toggle_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self._go(max(1, self.replay.turns))
        self._status()

    def _show_view(self, detail: TurnDetail) -> None:
        super()._show_view(detail)
        self._status()

    def _status(self) -> None:
        if not self.is_mounted:
            return
        r, turn = self.replay, self.turn
        where = "following: newest turn" if self.follow else f"paused at turn {turn} (F or End follows again)"
        # what your policy does here comes first, on a line of its own that is never wrapped away
        # (at 120 columns the agent's line wrapped and pushed it off, 37.6); each line is cut, not folded
        text = Text(no_wrap=True, overflow="ellipsis")
        stats = r.stats(turn) if turn and r.simulation is not None and turn <= r.turns else None
        if stats is not None:
            text.append(policy_line(r, stats, turn) + "\n", style="bold")
        if self.said_change:   # before the rest of its line: a cut takes the agent's closeness, not this
            text.append(self.said_change + " · ", style="bold")
        text.append(where, style="bold")
        if stats is not None:
            own = own_compaction(r.log, r.policy.window)
            api = provider_figure(self.detail.view, stats) if self.detail is not None and self.detail.view.turn == turn else None
            text.append(" · " + agent_line(own, api.tokens if api is not None else stats.base_tokens))
        for status in self.query("#follow-status").results(Static):   # none once the screen is coming down
            status.update(text)


def agent_line(own: OwnCompaction | None, tokens: int) -> str:
    if own is None:
        return f"the agent sent {tokens:,} (it has no compaction of its own)"
    return own.closeness(tokens)


def policy_line(r: Replay, stats, turn: int) -> str:
    """What the user's policy does to the request of this turn, in words."""
    p = r.policy
    sends = f"{stats.sent_tokens:,} of {p.window:,}"
    if stats.compaction:
        did = f"summarizes here and sends {sends}"
    elif stats.level != "none":
        did = f"is in its {stats.zone} zone: stages up to {stats.level}, sends {sends}"
    else:
        did = f"sends {sends} as is"
    return f"at turn {turn} your policy ({p.preset}) {did}"
