"""The A/B screen: one session under two policies, turn by turn.

Two gauge rows (A above B), the message list with a ≠ on every message the two requests edit
differently, the selected message as A sends it and as B sends it, both wallets on one chart
and the totals of each. It costs two simulations: A's is reused when the replay screen already
ran it. Workers compute, post messages; the handlers here own what is shown.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Static

from breakwater.core.compare import Comparison, message_diffs
from breakwater.core.log.visible import visible
from breakwater.core.policy import Policy, PolicyError, preset_names
from breakwater.core.policy.toml_file import resolve
from breakwater.core.replay import Replay, TurnDetail
from breakwater.ui.messages import SimulationFailed, TurnChosen
from breakwater.fidelity.results import PINNED
from breakwater.ui.screens.export import COMMAND as EXPORT_COMMAND, ExportScreen
from breakwater.ui.screens.fidelity import measure
from breakwater.ui.screens.layout import SHORT_ROWS
from breakwater.ui.widgets.footer import KeysFooter
from breakwater.ui.widgets.compare import BilledChart, CompareTotals
from breakwater.ui.widgets.fidelity_gauge import FidelityGauge, FidelityReady
from breakwater.ui.widgets.gauges import Gauges
from breakwater.ui.widgets.inspector import Inspector
from breakwater.ui.widgets.message_list import MessageList
from breakwater.ui.widgets.policy_panel import PRESET_KEYS


@dataclass
class ComparisonReady(Message):
    comparison: Comparison


@dataclass
class PairReady(Message):
    """Both requests of one turn, and the messages they edit differently."""

    turn: int
    a: TurnDetail
    b: TurnDetail
    differ: set[str]


def describe(policy: Policy) -> str:
    return f"{policy.preset} · window {policy.window:,} (soft {policy.soft_limit:,}, hard {policy.hard_limit:,})"


class CompareScreen(Screen):
    KEYS_NAME = "A/B"
    # screen CSS (not DEFAULT_CSS): it must win over the app's rules for the widgets it reuses
    CSS = """
    CompareScreen #cmp-head { height: 1; padding: 0 1; background: $panel; }
    CompareScreen .cmp-gauge-row { height: 4; }
    CompareScreen .cmp-side-label { width: 3; height: 4; content-align: center middle; text-style: bold;
                                    background: $panel; }
    CompareScreen #cmp-gauges-a, CompareScreen #cmp-gauges-b { width: 1fr; height: 4; padding: 0 1; }
    CompareScreen #cmp-main { height: 1fr; }
    CompareScreen #cmp-messages { width: 1fr; border: round $primary-darken-2; }
    CompareScreen #cmp-side { width: 1fr; }
    CompareScreen #cmp-side Inspector { height: 1fr; border: round $primary-darken-2; }
    CompareScreen #cmp-chart { height: 9; border: round $primary-darken-2; }
    CompareScreen #cmp-totals { padding: 0 1; }
    CompareScreen #cmp-prompt { display: none; }
    /* fewer than SHORT_ROWS rows: the list and the two requests keep their rows; the billed chart
       goes (the totals under it say the same in figures) and each gauge keeps its figure and bar */
    CompareScreen.-short #cmp-chart { display: none; }
    CompareScreen.-short .cmp-gauge-row, CompareScreen.-short .cmp-side-label { height: 2; }
    CompareScreen.-short #cmp-gauges-a, CompareScreen.-short #cmp-gauges-b { height: 2; }
    """
    BINDINGS = [
        Binding("right,l", "step(1)", "Next", key_display="→", id="compare.next", tooltip="Both policies: next turn"),
        Binding("left,h", "step(-1)", "Prev", key_display="←", id="compare.prev",
                tooltip="Both policies: previous turn"),
        Binding("home", "jump('first')", "First", show=False, id="compare.first", tooltip="First request"),
        Binding("end", "jump('last')", "Last", show=False, id="compare.last", tooltip="Last recorded request"),
        Binding("n", "next_differing", "Next ≠", id="compare.next_diff",
                tooltip="Select the next message that A and B edit differently"),
        Binding("x", "swap", "Swap A/B", id="compare.swap", tooltip="Exchange the two policies"),
        Binding("b", "ask_b", "B…", id="compare.choose_b", tooltip="Type B: a preset name or a TOML file"),
        *[Binding(key, f"preset_b('{name}')", f"B = {name}", show=False, id=f"compare.b.{name}",
                  tooltip=f"Compare with preset {name} (at B's window)") for name, key in PRESET_KEYS.items()],
        Binding("escape,c", "close", "Close A/B", id="compare.close", tooltip="Back to the single-policy replay"),
    ]

    def __init__(self, a: Replay, b: Policy, turn: int | None = None):
        super().__init__()
        self.a = a
        self.b = a.with_policy(b)
        self.turn = turn
        self.comparison: Comparison | None = None
        self.pair: PairReady | None = None
        self.messages = a.log.messages

    def export_commands(self) -> list[tuple[str, str, str]]:
        return [(*EXPORT_COMMAND, "export")] if self.turn is not None else []

    def action_export(self) -> None:
        def exported(said: str | None) -> None:
            if said:
                self.notify(visible(said), title="Exported", timeout=6)

        self.app.push_screen(ExportScreen(self.a, self.turn, self.b.policy), exported)

    def compose(self) -> ComposeResult:
        yield Static(id="cmp-head")
        for side in "ab":
            with Horizontal(classes="cmp-gauge-row"):
                yield Static(side.upper(), classes="cmp-side-label")
                yield Gauges(id=f"cmp-gauges-{side}")
                yield FidelityGauge(id=f"cmp-fidelity-{side}", hint="")
        with Horizontal(id="cmp-main"):
            yield MessageList(self.messages, set(), id="cmp-messages")
            with Vertical(id="cmp-side"):
                yield Inspector(self.messages, id="cmp-inspector-a")
                yield Inspector(self.messages, id="cmp-inspector-b")
        yield BilledChart(id="cmp-chart")
        yield CompareTotals(id="cmp-totals")
        yield Input(id="cmp-prompt", placeholder="B: a preset name or a policy file (TOML), enter to compare")
        yield KeysFooter()

    def on_resize(self, event) -> None:
        self.set_class(event.size.height < SHORT_ROWS, "-short")

    def on_mount(self) -> None:
        self.query_one("#cmp-chart").border_title = "Billed tokens so far — A and B"
        self.query_one(MessageList).focus()
        self._titles()
        self._simulate()

    def _titles(self) -> None:
        a, b = self.a.policy, self.b.policy
        self.query_one("#cmp-inspector-a").border_title = f"A: {a.preset} · {a.window:,}"
        self.query_one("#cmp-inspector-b").border_title = f"B: {b.preset} · {b.window:,}"
        lst = self.query_one(MessageList)
        differ = len(self.pair.differ) if self.pair else 0
        lst.border_title = f"Messages ({len(self.messages):,}) · ≠ {differ} edited differently"
        turns = self.a.turns
        where = f"turn {self.turn} / {turns}" if self.turn else "simulating both…"
        self.query_one("#cmp-head", Static).update(f"A/B · {where} │ A: {describe(a)} │ B: {describe(b)}")

    # -- workers ----------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="compare-simulate")
    def _simulate(self) -> None:
        a, b = self.a, self.b
        try:
            sim_a = a.simulation or a.run()
            sim_b = b.simulation or b.run()
        except Exception as exc:  # a bug in a stage must not take the screen down with it
            self.post_message(SimulationFailed(f"{type(exc).__name__}: {exc}"))
            return
        if a is self.a and b is self.b:
            self.post_message(ComparisonReady(Comparison(sim_a, sim_b)))

    @work(thread=True, exclusive=True, group="compare-view")
    def _load_pair(self, turn: int) -> None:
        try:
            da, db = self.a.detail(turn), self.b.detail(turn)
        except Exception as exc:
            self.post_message(SimulationFailed(f"turn {turn}: {type(exc).__name__}: {exc}"))
            return
        self.post_message(PairReady(turn, da, db, {d.message_id for d in message_diffs(da.view, db.view)}))

    # -- what the workers report ------------------------------------------------------------------
    @on(ComparisonReady)
    def _compared(self, message: ComparisonReady) -> None:
        c = self.comparison = message.comparison
        turns = len(c.a.turns)
        self.turn = max(1, min(self.turn or turns, turns))
        self.query_one(BilledChart).show(c, self.turn)
        self.query_one(CompareTotals).show(c)
        self._go(self.turn)
        for side, replay in (("a", self.a), ("b", self.b)):
            self.query_one(f"#cmp-fidelity-{side}", FidelityGauge).show(None, [], self.turn)
            self._measure(replay)

    @work(thread=True, group="compare-fidelity")
    def _measure(self, replay: Replay) -> None:
        try:
            measured = measure(replay)
        except Exception as exc:
            self.post_message(SimulationFailed(f"measuring fidelity: {type(exc).__name__}: {exc}"))
            return
        if measured is not None:
            self.post_message(FidelityReady(*measured, replay))

    def on_fidelity_ready(self, message: FidelityReady) -> None:
        side = "a" if message.source is self.a else "b" if message.source is self.b else None
        if side is None:
            return   # measured for a B that has since been changed
        self.query_one(f"#cmp-fidelity-{side}", FidelityGauge).show(message.run, message.loops, self.turn or 1)
        tally = message.run.tally()
        self.query_one(CompareTotals).show_recall(side.upper(), tally.recall(), tally.recall(PINNED))

    @on(PairReady)
    def _pair(self, message: PairReady) -> None:
        if message.turn != self.turn:
            return
        self.pair = message
        lst = self.query_one(MessageList)
        lst.set_marks(message.differ)
        lst.set_detail(message.a)
        self.query_one("#cmp-gauges-a", Gauges).show(message.a, self.a.stats(message.turn))
        self.query_one("#cmp-gauges-b", Gauges).show(message.b, self.b.stats(message.turn))
        self._titles()
        self._show_selected()

    @on(SimulationFailed)
    def _failed(self, message: SimulationFailed) -> None:
        self.notify(message.reason, title="Comparison failed", severity="error", timeout=30)

    @on(MessageList.Selected)
    def _selected(self, message: MessageList.Selected) -> None:
        self._show_selected()

    @on(TurnChosen)
    def _turn_chosen(self, message: TurnChosen) -> None:
        self._go(message.turn)

    def _show_selected(self) -> None:
        if self.pair is None:
            return
        index = self.query_one(MessageList).selected_index
        self.query_one("#cmp-inspector-a", Inspector).show(index, self.pair.a)
        self.query_one("#cmp-inspector-b", Inspector).show(index, self.pair.b)

    # -- actions ----------------------------------------------------------------------------------
    def _go(self, turn: int) -> None:
        if self.comparison is None:
            return
        self.turn = max(1, min(turn, len(self.comparison.a.turns)))
        self.query_one(BilledChart).set_turn(self.turn)
        for gauge in self.query(FidelityGauge):
            gauge.set_turn(self.turn)
        self._titles()
        self._load_pair(self.turn)

    def action_step(self, delta: int) -> None:
        if self.turn is not None:
            self._go(self.turn + delta)

    def action_jump(self, where: str) -> None:
        self._go(1 if where == "first" else self.a.turns)

    def action_next_differing(self) -> None:
        if self.pair is None or not self.pair.differ:
            return
        lst = self.query_one(MessageList)
        start = lst.selected_index if lst.selected_index is not None else -1
        ids = [i for i, m in enumerate(self.messages) if m.id in self.pair.differ]
        after = [i for i in ids if i > start]
        lst.select_index((after or ids)[0])

    def set_b(self, policy: Policy) -> None:
        self.b = self.a.with_policy(policy)
        self._restart()

    def _restart(self) -> None:
        self.comparison = self.pair = None
        self.query_one(BilledChart).show(None, 1)
        self.query_one(CompareTotals).show(None)
        self._titles()
        self._simulate()

    def action_swap(self) -> None:
        if self.b.simulation is None:
            return
        self.a, self.b = self.b, self.a
        self._restart()

    def action_preset_b(self, name: str) -> None:
        try:
            self.set_b(resolve(name).with_changes(window=self.b.policy.window))
        except PolicyError as exc:
            self.notify(str(exc), severity="error")

    def action_ask_b(self) -> None:
        prompt = self.query_one("#cmp-prompt", Input)
        prompt.display = True
        prompt.value = ""
        prompt.focus()

    @on(Input.Submitted, "#cmp-prompt")
    def _b_typed(self, event: Input.Submitted) -> None:
        prompt = self.query_one("#cmp-prompt", Input)
        prompt.display = False
        self.query_one(MessageList).focus()
        spec = event.value.strip()
        if spec in preset_names():   # as with its key (and --compare): a preset keeps the window, a file brings its own
            self.action_preset_b(spec)
            return
        try:
            policy = resolve(spec)
        except PolicyError as exc:
            self.notify(str(exc), title="B not changed", severity="error")
            return
        self.set_b(policy)

    def action_close(self) -> None:
        prompt = self.query_one("#cmp-prompt", Input)
        if prompt.display:
            prompt.display = False
            self.query_one(MessageList).focus()
            return
        self.dismiss(None)


__all__ = ["CompareScreen", "ComparisonReady", "PairReady"]
