"""The replay screen: a recorded session under one policy, stepped turn by turn.

State lives here and in `Replay` (core); widgets only draw what they are handed. Workers run the
simulation and build each turn's request, and post `messages.*`; the `@on` handlers below are
the only code that changes what is shown.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

from textual import on, work
from textual.worker import get_current_worker
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input

from breakwater.core.log.visible import visible
from breakwater.core.compare import counterpart
from breakwater.core.context_categories import for_turn
from breakwater.core.review import SummaryProposal
from breakwater.core.log.edits import View
from breakwater.core.overlay import (OverlayFile, apply_overlay, compaction_record, manual_compaction, overlay_path,
                                     position_of_turn)
from breakwater.core.simulate import view_at
from breakwater.core.replay import Replay, TurnDetail
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.log.words import plural
from breakwater.ui.screens.controls import CONTROL_BINDINGS, ControlsMixin, describe_event
from breakwater.ui.screens.dialogs import SummaryReviewScreen
from breakwater.ui.screens.overlay import ALL, OverlayScreen, edits_note
from breakwater.ui.screens.fidelity import FIDELITY_BINDINGS, FidelityMixin
from breakwater.ui.screens.layout import SHORT_ROWS
from breakwater.ui.spill import SpillPane
from breakwater.ui.messages import (FirstLook, MessageChosen, SimulationFailed, SimulationProgress, SimulationReady,
                                    TurnChosen,
                                    ViewReady)
from breakwater.ui.screens.context import ContextScreen
from breakwater.ui.screens.export import COMMAND as EXPORT_COMMAND, ExportScreen
from breakwater.ui.widgets.badges import ROLES
from breakwater.ui.widgets.context_line import ContextLine
from breakwater.ui.widgets.fidelity_gauge import FidelityGauge
from breakwater.ui.widgets.footer import KeysFooter
from breakwater.ui.widgets.gauges import Gauges
from breakwater.ui.widgets.inspector import Inspector
from breakwater.ui.widgets.message_list import ListFilter, MessageList
from breakwater.ui.widgets.policy_panel import PolicyPanel
from breakwater.ui.widgets.replay_controls import SPEEDS, ReplayControls
from breakwater.ui.widgets.timeline import Timeline



STEP = Binding.Group("Step")


class Superseded(Exception):
    """The simulation in progress is for a policy that is no longer the current one."""


def pins_of(replay: Replay) -> set[str]:
    """The messages pinned at the end of the log (a pin, an unpin, or an undo naming a pin)."""
    pins: set[str] = set()
    pinned_by: dict[str, str] = {}
    for ev in replay.log.events:
        if ev.type in ("pin", "unpin"):
            (pins.add if ev.type == "pin" else pins.discard)(str(ev.get("message_id")))
            if ev.type == "pin":
                pinned_by[ev.id] = str(ev.get("message_id"))
        elif ev.type == "undo" and str(ev.get("target")) in pinned_by:
            pins.discard(pinned_by.pop(str(ev.get("target"))))
    return pins


INSPECT_DELAY = 0.04   # seconds; shorter than a key repeat
FIDELITY_DELAY = 1.0   # seconds after a new simulation is drawn before its fidelity is measured
PROGRESS_EVERY = 0.1   # seconds between progress reports of a simulation


class ReplayScreen(FidelityMixin, ControlsMixin, Screen):
    KEYS_NAME = "replay"   # in the footer, before the screen's keys that still work where the focus is
    # in the order of importance: a narrow footer offers them in this order while they fit
    BINDINGS = [
        Binding("left,h", "step(-1)", "Prev", key_display="←", id="replay.prev", tooltip="Step one request back",
                group=STEP),
        Binding("right,l", "step(1)", "Next", key_display="→", id="replay.next", tooltip="Step one request forward",
                group=STEP),
        Binding("space", "play", "Play", id="replay.play", tooltip="Step through the turns automatically"),
        Binding("g", "prompt('turn')", "Turn…", id="replay.goto", tooltip="Type a turn number to jump to"),
        Binding("p", "toggle_policy", "Policy", id="policy.show",
                tooltip="Show the policy panel: change any value and the session is re-simulated"),
        Binding("s", "toggle_spill", "Spill", id="spill.toggle", tooltip="Show or hide the spill files pane"),
        Binding("c", "compare", "A/B", id="compare.open",
                tooltip="Compare this policy with another (its preset, or the next preset) side by side"),
        *CONTROL_BINDINGS, *FIDELITY_BINDINGS,
        Binding("slash", "prompt('search')", "Search", id="list.search", tooltip="Show only messages containing text"),
        Binding("r", "cycle_role", "Role", id="filter.role", tooltip="Filter the list by role (cycles)"),
        Binding("e", "cycle_kind", "Kind", id="filter.kind", tooltip="Filter the list by edit kind (cycles)"),
        Binding("home", "jump('first')", "First", id="replay.first", tooltip="Jump to the first request"),
        Binding("end", "jump('last')", "Last", id="replay.last", tooltip="Jump to the last recorded request"),
        Binding("plus,equals_sign", "speed(1)", "Faster", show=False, id="replay.faster", tooltip="Play faster"),
        Binding("minus", "speed(-1)", "Slower", show=False, id="replay.slower", tooltip="Play slower"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="filter.clear",
                tooltip="Show every message again"),
        Binding("i", "focus_inspector", "Inspector", show=False, id="inspector.focus",
                tooltip="Move the focus to the inspector (scroll the texts)"),
        Binding("x", "context", "Context", show=False, id="context.show",
                tooltip="This turn's request by category: system, tools, memory, messages, results, free space"),
    ]

    def __init__(self, replay: Replay, turn: int | None = None, workspace: Path | None = None,
                 play_interval: float = 0.5, overlay: OverlayFile | None = None):
        super().__init__()
        self.replay = replay
        # a recording never changes: what the user does to it goes to its overlay, merged on top
        self.recording: SessionLog = replay.recording or replay.log
        self.overlay = overlay
        self.turn = turn
        self.workspace = workspace
        self.play_interval = play_interval
        self.detail = None
        self.speed_index = SPEEDS.index(1.0)
        self._player: Timer | None = None
        self._inspect_timer: Timer | None = None
        self._prompt_mode = ""
        self._fidelity_due = False
        self._fidelity_timer: Timer | None = None
        self._first_look = True   # the first simulation draws a heuristic first look before its exact pass
        self.messages = replay.log.messages

    # -- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        log = self.replay.log
        title = log.header.get("title") or (log.path.name if log.path else log.id)
        name = log.path.name if log.path else ""
        yield ReplayControls(visible(f"{name} — {title}" if name and name != title else str(title)), id="controls")
        with Horizontal(id="gauge-row"):
            yield Gauges(id="gauges")
            yield FidelityGauge(id="fidelity")
        yield ContextLine(id="context-line")
        with Horizontal(id="main"):
            yield MessageList(self.messages, pins_of(self.replay), id="messages")
            with Vertical(id="side"):
                yield PolicyPanel(self.replay.policy, id="policy")
                yield Inspector(self.messages, id="inspector")
        yield Timeline(id="timeline")
        # full width under the list and inspector, in the timeline's place: log lines are wide
        yield SpillPane(self.workspace or Path.cwd(), log.id, id="spill")
        yield Input(id="prompt")
        yield KeysFooter()

    def on_mount(self) -> None:
        p = self.replay.policy
        controls = self.query_one(ReplayControls)
        controls.update_state(policy_line=f"preset {p.preset} · window {p.window:,} · counter {self.replay.counter_in_effect}",
                              turns=self.replay.turns, turn=self.turn or self.replay.turns, pending=True)
        self.query_one("#messages").border_title = f"Messages ({len(self.messages):,})"
        self.query_one("#timeline").border_title = "Timeline — tokens per turn"
        self.query_one("#spill").border_title = "Spill files"
        self.query_one(MessageList).focus()
        self._show_overlay_note()
        if self.overlay is not None and edits_note(self.overlay):
            self.notify(f"{edits_note(self.overlay)[2:]} from {self.overlay.path} (ctrl+p: Overlay… to list or "
                        f"clear them)", title="Your edits of this recording", timeout=8)
        self.call_after_refresh(self._simulate)   # the list paints first; the worker shares the GIL

    def _show_overlay_note(self) -> None:
        self.query_one(ReplayControls).update_state(overlay=edits_note(self.overlay))

    # -- workers ----------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="simulate")
    def _simulate(self) -> None:
        worker = get_current_worker()
        reported = time.monotonic()

        def progress(turn: int, total: int) -> None:
            nonlocal reported
            if worker.is_cancelled:  # a newer policy is being simulated: stop, rather than compete for the CPU
                raise Superseded
            # each report repaints the bar on the main thread, which takes the GIL from this run
            if time.monotonic() - reported >= PROGRESS_EVERY:
                reported = time.monotonic()
                self.post_message(SimulationProgress(turn, total))

        # the run keeps thousands of containers (its checkpoints) that live as long as the screen:
        # with the cyclic collector on, every young collection walks those made since the last one,
        # and once they are old every full collection walks them all (≈100 ms at 20k messages, in
        # any step). So it pauses for the run, and what the run keeps is frozen before it resumes.
        collecting = gc.isenabled()
        gc.disable()
        replay = self.replay
        first_look, self._first_look = self._first_look and replay.counter_in_effect == "exact", False
        try:
            turns = replay.log.turn_count()
            focus = max(1, min(self.turn_to_show(turns), turns + 1))
            if first_look:
                self._look_first(replay, focus, worker)
            sim = replay.run(progress=progress, focus=focus)
            # its request was built in the same pass: drawn with the timeline, not by a second worker
            detail = replay.detail(focus)
            gc.freeze()
        except Superseded:
            return
        except Exception as exc:  # a bug in a stage must not take the screen down with it
            self.post_message(SimulationFailed(f"{type(exc).__name__}: {exc}"))
            return
        finally:
            if collecting:
                gc.enable()
        self.post_message(SimulationReady(sim, detail))

    def _look_first(self, replay: Replay, focus: int, worker) -> None:
        """The request of `focus` by the heuristic counter, posted before the exact pass: that pass loads
        tiktoken's ranks and counts exactly near the limits (≈0.35 s before the first request of a short
        session, 4× the heuristic's time on a long one), and the gauges would wait for all of it."""
        def check(turn: int, total: int) -> None:
            if worker.is_cancelled:
                raise Superseded

        quick = Replay(replay.log, replay.policy, "heuristic", replay.model, replay.summarizer,
                       recording=replay.recording, window_source=replay.window_source)
        quick.run(progress=check, focus=focus)
        self.post_message(FirstLook(replay, quick.detail(focus), quick.stats(focus)))

    @work(thread=True, exclusive=True, group="view")
    def _load_view(self, turn: int) -> None:
        replay = self.replay
        try:
            detail = replay.detail(turn)
        except Exception as exc:
            self.post_message(SimulationFailed(f"turn {turn}: {type(exc).__name__}: {exc}"))
            return
        if replay is self.replay:  # else the policy changed meanwhile: this request is of the old one
            self.post_message(ViewReady(turn, detail))

    # -- what the workers report ------------------------------------------------------------------
    @on(SimulationProgress)
    def _progress(self, message: SimulationProgress) -> None:
        self.query_one(Timeline).set_progress(message.turn, message.total)
        self.query_one(ReplayControls).update_state(progress=(message.turn, message.total))

    @on(FirstLook)
    def _first_looked(self, message: FirstLook) -> None:
        if message.replay is not self.replay or self.replay.simulation is not None:
            return  # the policy changed meanwhile, or the exact figures are already drawn
        self.query_one(Gauges).show(message.detail, message.stats, first_look=True)
        self.query_one(ReplayControls).update_state(first_look=True)

    @on(SimulationReady)
    def _simulated(self, message: SimulationReady) -> None:
        if message.simulation is not self.replay.simulation:
            return  # a run for a policy the panel has since changed, or of the log before it grew
        turns = self.replay.turns
        self.turn = max(1, min(self.turn_to_show(turns), turns + 1))
        self.query_one(Timeline).origins = self.replay.recorded_origins()
        self.query_one(Timeline).show(message.simulation, self.turn)
        self.query_one(ReplayControls).update_state(turns=turns, progress=None, first_look=False)
        self._fidelity_due = True   # once the request is drawn: the measurement would slow its repaint
        if message.detail.view.turn == self.turn:
            self._at(self.turn)
            self._show_view(message.detail)
        else:
            self._go(self.turn)

    def turn_to_show(self, turns: int) -> int:
        """The turn to draw once a simulation is ready: the one asked for, else the last."""
        return self.turn if self.turn is not None else max(1, turns)

    @on(SimulationFailed)
    def _failed(self, message: SimulationFailed) -> None:
        self.query_one(ReplayControls).update_state(first_look=False)
        self.notify(visible(message.reason), title="Simulation failed", severity="error", timeout=30)

    @on(ViewReady)
    def _view_ready(self, message: ViewReady) -> None:
        if message.turn != self.turn:
            return  # a later step is already on its way
        self._show_view(message.detail)

    def _show_view(self, detail: TurnDetail) -> None:
        self.detail = detail
        self.query_one(MessageList).set_detail(detail)
        self.query_one(Gauges).show(detail, self.replay.stats(detail.view.turn))
        self.query_one(ContextLine).show(for_turn(self.replay, detail))
        p = self.replay.policy
        # the window this request is planned under, and where it came from (a live session may have
        # learnt a smaller one from the provider: the policy's figure is then not the one in use)
        self.query_one(ReplayControls).update_state(
            pending=False, policy_line=f"preset {p.preset} · window {detail.view.window:,}"
                                      f"{'' if detail.view.window == p.window else ' (' + detail.window_source + ')'}"
                                      f" · counter {self.replay.counter_in_effect}")
        self._show_selected()
        if self._fidelity_due:
            # it replays every request of the session: started once the user has looked a moment,
            # and not at all when the policy changes again before that
            self._fidelity_due = False
            self._fidelity_timer = self.set_timer(FIDELITY_DELAY, self.measure_fidelity)

    @on(MessageList.Selected)
    def _selected(self, message: MessageList.Selected) -> None:
        # the cursor row repaints at once; the inspector follows when the key stops repeating
        if self._inspect_timer is not None:
            self._inspect_timer.stop()
        self._inspect_timer = self.set_timer(INSPECT_DELAY, self._show_selected)

    @on(TurnChosen)
    def _turn_chosen(self, message: TurnChosen) -> None:
        self._go(message.turn, show=True)

    @on(MessageChosen)
    def _message_chosen(self, message: MessageChosen) -> None:
        self.query_one(MessageList).select_id(message.message_id)

    def _show_selected(self) -> None:
        self.query_one(Inspector).show(self.query_one(MessageList).selected_index, self.detail)

    # -- replay -----------------------------------------------------------------------------------
    def _go(self, turn: int, show: bool = False) -> None:
        """To request `turn`; `show`: the list goes to the messages it brings (a jump, play), where a
        step keeps the message selected, to follow it from one request to the next."""
        if self.replay.simulation is None:
            return
        turn = max(1, min(turn, self.replay.turns + 1))
        self._at(turn)
        if show:
            self.query_one(MessageList).show_turn(turn)
        self._load_view(turn)

    def _at(self, turn: int) -> None:
        """The turn on screen is `turn`; its request is on its way."""
        self.turn = turn
        self.query_one(ReplayControls).update_state(turn=turn, pending=True)
        self.query_one(Timeline).set_turn(turn)
        self.query_one(FidelityGauge).set_turn(turn)

    def action_step(self, delta: int) -> None:
        if self.turn is not None:
            self._go(self.turn + delta)

    def action_jump(self, where: str) -> None:
        self._go(1 if where == "first" else max(1, self.replay.turns), show=True)

    def action_play(self) -> None:
        if self._player is not None:
            self._stop()
            return
        if self.turn is not None and self.turn >= self.replay.turns:
            self._go(1)
        self._player = self.set_interval(self.play_interval / SPEEDS[self.speed_index], self._tick)
        self.query_one(ReplayControls).update_state(playing=True)

    def _tick(self) -> None:
        if self.turn is None or self.turn >= self.replay.turns:
            self._stop()
            return
        self._go(self.turn + 1, show=True)

    def _stop(self) -> None:
        if self._player is not None:
            self._player.stop()
            self._player = None
        self.query_one(ReplayControls).update_state(playing=False)

    def action_speed(self, delta: int) -> None:
        self.speed_index = max(0, min(len(SPEEDS) - 1, self.speed_index + delta))
        self.query_one(ReplayControls).update_state(speed=SPEEDS[self.speed_index])
        if self._player is not None:
            self._stop()
            self.action_play()

    # -- filters and prompts ----------------------------------------------------------------------
    def _filter(self, **changes) -> None:
        lst = self.query_one(MessageList)
        current = lst.filter
        lst.set_filter(ListFilter(**{**current.__dict__, **changes}))
        self._show_selected()

    def action_cycle_role(self) -> None:
        order = [None, *ROLES]
        cur = self.query_one(MessageList).filter.role
        self._filter(role=order[(order.index(cur) + 1) % len(order)])

    def action_cycle_kind(self) -> None:
        lst = self.query_one(MessageList)
        present = lst.kinds_present()
        if not present and lst.filter.kind is None:
            self.notify(f"nothing was compacted at turn {self.turn}: no edit kinds to filter by", timeout=4)
            return
        order = [None, "any", *present]
        cur = lst.filter.kind if lst.filter.kind in order else None
        self._filter(kind=order[(order.index(cur) + 1) % len(order)])

    def action_clear_filter(self) -> None:
        prompt = self.query_one("#prompt", Input)
        if prompt.display:
            prompt.display = False
            self.query_one(MessageList).focus()
            return
        self._filter(role=None, kind=None, search="")

    def action_prompt(self, mode: str) -> None:
        prompt = self.query_one("#prompt", Input)
        self._prompt_mode = mode
        prompt.placeholder = (f"turn number (1–{self.replay.turns + 1}), enter to jump" if mode == "turn"
                              else "search text, enter to filter (empty: all)")
        prompt.value = self.query_one(MessageList).filter.search if mode == "search" else ""
        prompt.display = True
        prompt.focus()

    @on(Input.Submitted, "#prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        prompt = self.query_one("#prompt", Input)
        prompt.display = False
        self.query_one(MessageList).focus()
        value = event.value.strip()
        if self._prompt_mode == "turn":
            if not value.isdigit():
                self.notify(f"{value!r} is not a turn number", severity="warning")
                return
            self._go(int(value), show=True)
        else:
            self._filter(search=value)

    def action_toggle_spill(self) -> None:
        spill = self.query_one("#spill")
        spill.display = not spill.display
        self.query_one(Timeline).display = not spill.display
        if spill.display:
            spill.focus()
        else:
            self.query_one(MessageList).focus()

    # -- tuning ------------------------------------------------------------------------------------
    @on(PolicyPanel.Changed)
    def _retune(self, message: PolicyPanel.Changed) -> None:
        if message.policy != self.query_one(PolicyPanel).policy or message.policy == self.replay.policy:
            return   # keys came in a burst: the panel has moved on, its newest value follows
        if self._fidelity_timer is not None:
            self._fidelity_timer.stop()
        self.workers.cancel_group(self, "fidelity")   # a measurement of the old policy: stop it, not compete
        self.replay = self.replay.with_policy(message.policy)
        p = message.policy
        self.query_one(ReplayControls).update_state(
            policy_line=f"preset {p.preset} · window {p.window:,} · counter {self.replay.counter_in_effect}", pending=True,
            first_look=False)
        self._simulate()

    def on_resize(self, event) -> None:
        # a short terminal: the timeline gives rows to the list, and the policy panel the inspector's
        self.set_class(event.size.height < SHORT_ROWS, "-short")

    def action_toggle_policy(self) -> None:
        panel = self.query_one(PolicyPanel)
        panel.display = not panel.display
        self.query_one("#side").set_class(panel.display, "-policy")
        if panel.display:
            panel.table.focus()
        else:
            self.query_one(MessageList).focus()

    def action_compare(self) -> None:
        from breakwater.ui.screens.compare import CompareScreen

        self.app.push_screen(CompareScreen(self.replay, counterpart(self.replay.policy, self.replay.log.header), self.turn))

    def action_context(self) -> None:
        line = self.query_one(ContextLine)
        if line.categories is not None and self.detail is not None:
            self.app.push_screen(ContextScreen(line.categories, self.detail.view.turn,
                                               self.query_one(Gauges).figures()))

    def action_focus_inspector(self) -> None:
        self.query_one("#inspector-raw").focus()

    # -- control by hand: on a recording, everything goes to its overlay ---------------------------
    def _overlay(self) -> OverlayFile | None:
        if self.overlay is None:
            if self.recording.path is None:
                self.notify("This session has no file, so there is nowhere to keep a pin or undo.",
                            severity="warning")
                return None
            self.overlay = OverlayFile(overlay_path(self.recording.path))
        return self.overlay

    def record_control(self, type: str, data: dict) -> None:
        overlay = self._overlay()
        if overlay is None or self.turn is None:
            return
        try:
            event = overlay.add(type, position_of_turn(self.recording, self.turn), **data)
        except (OSError, ValueError) as exc:
            self.notify(f"Could not write {overlay.path}: {exc}", title="Not recorded", severity="error")
            return
        if overlay.set_aside is not None:   # a torn last line (a full disk, a crash) moved beside the file
            self.notify(visible(str(overlay.set_aside)), title="A torn line was set aside", severity="warning",
                        timeout=10)
        self.notify(f"{type} {next(iter(data.values()))} from turn {self.turn} on — kept in {overlay.path.name}",
                    title="Recorded in the overlay", timeout=4)
        self.reload(self._with_overlay(), event)

    def overlay_commands(self) -> list[tuple[str, str, str]]:
        """(title, help, action) for the palette: the overlay's edits, listed and cleared."""
        o = self.overlay
        if o is None or not o.events:
            return []
        return [(f"Overlay: show the {edits_note(o)[2:] or plural(len(o.events), 'overlay line') + ' (no edit in effect)'}",
                 f"Kept in {o.path}", "show_overlay"),
                ("Overlay: clear every edit", f"Show the recording as recorded ({o.path} is emptied)",
                 f"clear_overlay({ALL!r})"),
                *((f"Overlay: clear {describe_event(ev)}", "Take this edit out of the overlay",
                   f"clear_overlay({ev.id!r})") for ev in reversed(o.events))]

    def export_commands(self) -> list[tuple[str, str, str]]:
        return [(*EXPORT_COMMAND, "export")] if self.turn is not None else []

    def action_export(self) -> None:
        self.app.push_screen(ExportScreen(self.replay, self.turn), self._exported)

    def _exported(self, said: str | None) -> None:
        if said:
            self.notify(visible(said), title="Exported", timeout=6)

    def action_show_overlay(self) -> None:
        if self.overlay is None:
            self.notify("No overlay: this session has no edits of yours.", timeout=4)
            return
        self.app.push_screen(OverlayScreen(self.overlay, self.recording), self.action_clear_overlay)

    def action_clear_overlay(self, target: str | None) -> None:
        if not target or self.overlay is None:
            return
        ids = [ev.id for ev in self.overlay.events] if target == ALL else [target]
        try:
            removed = self.overlay.remove(ids)
        except OSError as exc:
            self.notify(f"Could not rewrite {self.overlay.path}: {exc}", title="Nothing cleared", severity="error")
            return
        self.notify(f"Cleared {plural(len(removed), 'edit')} from {self.overlay.path.name}; "
                    f"{plural(len(self.overlay.events), 'edit')} left.", title="Overlay", timeout=5)
        self.reload(self._with_overlay())

    def request_with(self, event: Event) -> View | None:
        """The request at the current turn were `event` added to the overlay there (in a thread)."""
        if self.turn is None:
            return None
        at = position_of_turn(self.recording, self.turn)
        event = Event(event.type, event.id, {**event.data, "at": at})
        log = apply_overlay(self.recording, [*(self.overlay.events if self.overlay else ()), event])
        r = self.replay
        return view_at(log, r.policy, self.turn, r.counter, r.model)

    def _with_overlay(self) -> Replay:
        r = self.replay
        return Replay(self.overlay.apply(self.recording), r.policy, r.counter, r.model, r.summarizer,
                      recording=self.recording, tokens=r.tokens, window_source=r.window_source)

    def reload(self, replay: Replay, cause=None) -> None:
        """Show another simulation of the session (its log grew, an overlay event, another policy)."""
        self.replay = replay
        self.app.replay = replay
        self.messages = replay.log.messages
        lst = self.query_one(MessageList)
        lst.set_messages(self.messages, pins_of(replay))
        self.query_one(Inspector).set_messages(self.messages)
        self.query_one("#messages").border_title = f"Messages ({len(self.messages):,})"
        self.query_one(ReplayControls).update_state(pending=True, first_look=False)
        self._show_overlay_note()
        self._simulate()

    @work(exclusive=True, group="compact")
    async def compact_now(self) -> None:
        if self.turn is None or self._overlay() is None:
            return
        r = self.replay
        turn = self.turn
        comp, view = await asyncio.to_thread(manual_compaction, r.log, r.policy, turn, r.counter, r.model)
        if comp is None:
            self.notify("Nothing before this request can be summarized.", severity="warning")
            return
        before = self.detail.view if self.detail is not None and self.detail.view.turn == turn else None
        proposal = SummaryProposal.of(comp, view, before)
        if not proposal.covered:
            # a summary that replaces nothing saves nothing: offering it (and recording it on Accept)
            # said "0 messages, 33,330 → 33,330" and then nothing at all
            by = r.compaction_by(turn)
            why = (f"{by} already {'compacted' if by == 'you' else 'compacts'} this request, and D would make "
                   f"the same summary" if by else
                   "every message this summary would replace is already summarized or kept as the recent "
                   "turns the policy keeps whole")
            self.notify(f"Nothing to compact at turn {turn}: {why}.", severity="warning", timeout=6)
            return
        at_risk = await self.facts_at_risk(proposal, before, turn)
        decision = await self.app.push_screen_wait(SummaryReviewScreen(proposal, at_risk))
        if decision.action == "cancel":
            self.notify("Deep compaction cancelled; nothing was recorded.", timeout=3)
            return
        record = compaction_record(comp)
        if decision.action == "edit":
            record.update(summary=decision.text, reviewed="edited")
        self.record_control("compaction", record)
