"""Fidelity on the replay screen (issue 12): the gauge's worker, the facts a request lost, and the
facts a deep compaction would lose.

A worker replays the session for its probes (`fidelity.runner.replay`, the very engine of
`breakwater eval`) under the screen's policy, counter and summarizer, so the gauge shows what
`eval` measures; widgets only draw the `FidelityRun` it posts. `FidelityMixin` is mixed into the
replay screen (and so the chat screen), next to the controls.
"""

from __future__ import annotations

import asyncio
import time

from rich.text import Text
from textual import events, on, work
from textual.worker import get_current_worker
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from breakwater.core.log.edits import View
from breakwater.core.log.session_log import SessionLog
from breakwater.fidelity.loops import Loop
from breakwater.fidelity.probes import Probe
from breakwater.fidelity.results import FidelityRun
from breakwater.ui.messages import SimulationFailed
from breakwater.ui.widgets.fidelity_gauge import FidelityGauge, FidelityReady, percent
from breakwater.ui.widgets.message_list import MessageList

# The measurement replays every request of the session: at 20k messages that is minutes of CPU. It
# runs in a process of its own at the lowest priority (in a thread, holding the GIL, it made each key
# wait for it), and either way it pauses while the user is at the keys (or the mouse) and carries
# on once they have been idle this long.
INPUT_QUIET_S = 0.5

FIDELITY_BINDINGS = [
    Binding("f", "lost_facts", "Lost facts", id="fidelity.lost",
            tooltip="The facts this request no longer carries (those lost at this turn first); enter jumps to "
                    "the message each came from"),
]


def measure(replay, busy=lambda: False) -> tuple[FidelityRun, list[Loop]] | None:
    """What `breakwater eval` measures for this session under this replay's settings (slow: in a
    worker, which may cancel it: then None). While `busy()` says the user is at the keys, it waits
    between requests."""
    from breakwater.fidelity import loops
    from breakwater.fidelity.background import replay_in_background
    from breakwater.fidelity.runner import Stopped
    from breakwater.fidelity.runner import replay as fidelity_replay

    worker = get_current_worker()
    # a live chat appends to its log while this runs: measure the entries there are now
    log = SessionLog(replay.log.header, list(replay.log.entries))
    def stop() -> bool:
        while busy() and not worker.is_cancelled:
            time.sleep(0.02)
        return worker.is_cancelled

    try:
        if replay.summarizer is None:   # the offline summarizer: measured in a process of its own
            run = replay_in_background(log, replay.policy, replay.counter, replay.model,
                                       lambda: worker.is_cancelled, busy)
        else:   # a model's summarizer (its client lives here): in this thread, between keys
            run = fidelity_replay(log, replay.policy, replay.counter, summarizer=replay.summarizer,
                                  model=replay.model, stop=stop)
    except Stopped:
        return None
    return run, loops.find(run.compaction_turns, run.reads)


def probe_line(probe: Probe, note: str = "") -> Text:
    out = Text()
    out.append(f"{probe.category:<9} ", style="bold")
    out.append(" ".join(probe.text.split()))
    where = f"  · from turn {probe.turn}, message {probe.message_id}"
    out.append(where + (f" · {note}" if note else ""), style="dim")
    return out


class FidelityMixin:
    """The gauge's worker and the lost-facts dialog; the screen has `replay`, `turn`, a FidelityGauge."""

    fidelity: FidelityRun | None = None
    fidelity_loops: list[Loop] = []
    _input_at = 0.0          # when the user last pressed a key or a mouse button here (monotonic)
    fidelity_yielded = 0     # how many times the measurement waited for the user: the bench and a test read it

    def on_key(self, event: events.Key) -> None:
        self._input_at = time.monotonic()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._input_at = time.monotonic()

    def _user_busy(self) -> bool:
        if time.monotonic() - self._input_at < INPUT_QUIET_S:
            self.fidelity_yielded += 1
            return True
        return False

    def measure_fidelity(self) -> None:
        """The session or policy changed: measure again (the gauge says so until it is done)."""
        self.fidelity, self.fidelity_loops = None, []
        self.query_one(FidelityGauge).show(None, [], self.turn or 1)
        self._measure_fidelity(self.replay)

    @work(thread=True, exclusive=True, group="fidelity")
    def _measure_fidelity(self, replay) -> None:
        try:
            measured = measure(replay, self._user_busy)
        except Exception as exc:  # a bug in a probe must not take the screen down with it
            self.post_message(SimulationFailed(f"measuring fidelity: {type(exc).__name__}: {exc}"))
            return
        if measured is not None:
            self.post_message(FidelityReady(*measured, replay))

    def on_fidelity_ready(self, message: FidelityReady) -> None:
        if message.source is not self.replay:
            return   # measured for a policy or log the screen has since left
        self.fidelity, self.fidelity_loops = message.run, message.loops
        self.query_one(FidelityGauge).show(message.run, message.loops, self.turn or 1)

    async def facts_at_risk(self, proposal, before: View | None, turn: int) -> list[Probe] | None:
        """The facts request `turn` (`before`, when the screen has it) carries that the request the
        proposal makes carries only if its summary says them; None if they cannot be measured."""
        run, log = self.fidelity, self.replay.log

        def work() -> list[Probe]:
            from breakwater.fidelity.probes import extract
            from breakwater.fidelity.scoring import Scorer, at_risk

            request = before if before is not None else self.replay.view(turn)
            scorer = Scorer(run.probes if run is not None else extract(SessionLog(log.header, list(log.entries))))
            return at_risk(scorer, request.messages, proposal.view.messages, proposal.compaction.id, turn)

        try:
            return await asyncio.to_thread(work)
        except Exception as exc:  # the review goes on without the list rather than not at all
            self.notify(f"Could not check which facts the summary loses: {type(exc).__name__}: {exc}",
                        severity="warning")
            return None

    def action_lost_facts(self) -> None:
        if self.fidelity is None:
            self.notify("Still measuring which facts each request carries; try again in a moment.", timeout=3)
            return
        self.app.push_screen(LostFactsScreen(self.fidelity, self.fidelity_loops, self.turn or 1), self._jump_to_fact)

    def _jump_to_fact(self, message_id: str | None) -> None:
        if not message_id:
            return
        lst = self.query_one(MessageList)
        if not lst.select_id(message_id):
            self.notify(f"Message {message_id} is hidden by the list's filter (esc clears it).", severity="warning")


class LostFactsScreen(ModalScreen[str | None]):
    """The facts the request at one turn no longer carries: lost at this turn first, then the ones
    lost earlier; enter jumps to the message a fact came from."""

    BINDINGS = [Binding("escape,f", "close", "Close", id="fidelity.close", tooltip="Back to the replay")]
    DEFAULT_CSS = """
    LostFactsScreen { align: center middle; background: $background 60%; }
    LostFactsScreen #lost-dialog { height: 80%; }
    LostFactsScreen #lost-what { padding: 1 0 0 0; height: auto; }
    LostFactsScreen #lost-list { height: 1fr; border: round $panel-lighten-2; }
    """

    def __init__(self, run: FidelityRun, loops: list[Loop], turn: int):
        super().__init__()
        self.run, self.loops, self.turn = run, loops, turn
        missing = sorted(run.missing_at(turn), key=lambda pl: (pl[1] != turn, -pl[1], pl[0].id))
        self.here = [p for p, lost in missing if lost == turn]
        self.missing = missing

    def compose(self) -> ComposeResult:
        with Vertical(id="lost-dialog", classes="dialog"):
            yield Static(self._what(), id="lost-what")
            options = [Option(probe_line(p, "lost at this turn" if lost == self.turn else f"lost at turn {lost}"),
                              id=p.id) for p, lost in self.missing]
            yield OptionList(*(options or [Option(Text("nothing is missing: this request carries every fact so far",
                                                       style="dim"), disabled=True)]), id="lost-list")

    def on_mount(self) -> None:
        dialog = self.query_one("#lost-dialog")
        dialog.border_title = f"Facts at turn {self.turn} — what the request no longer carries"
        self.query_one(OptionList).focus()

    def _what(self) -> Text:
        run, k = self.run, self.turn
        out = Text.assemble(("all facts ", "dim"), (percent(run.recall_at(k)), "bold"),
                            (" · pinned ", "dim"), (percent(run.pinned_at(k)), "bold"),
                            (f" · {len(self.here)} lost at this turn · {len(self.missing)} missing in all", ""))
        for loop in self.loops:
            out.append(f"\n⟳ {loop.text}", style="bold red")
            out.append(f" — {loop.meaning}", style="dim")
        out.append("\nenter: jump to the message the fact came from · esc: close", style="dim")
        return out

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        probe = next(p for p in self.run.probes if p.id == event.option.id)
        self.dismiss(probe.message_id)

    def action_close(self) -> None:
        self.dismiss(None)
