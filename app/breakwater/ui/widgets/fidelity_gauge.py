"""The fidelity gauge, beside the token gauge: of the facts the session has created so far, the
share the current request still carries — all of them, and what must not be lost (goal and
constraints, modified files, pins, the latest error) — how many this turn lost, and a ⟳ when
the run loops (compaction every few turns, re-reads after compactions).

It draws a `FidelityRun` that a worker computed (`FidelityReady`); it never replays anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message

from breakwater.fidelity.loops import Loop
from breakwater.fidelity.results import FidelityRun
from breakwater.ui.widgets.drawn import Drawn

GOOD, FAIR = 0.95, 0.8       # the bar for the pinned facts; below FAIR is a real loss
BAR_CELLS = 10
EIGHTHS = " ▏▎▍▌▋▊▉█"


@dataclass
class FidelityReady(Message):
    """A worker replayed the session for its probes: `run` belongs to the replay `source`."""

    run: FidelityRun
    loops: list[Loop]
    source: object


def percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


class FidelityGauge(Drawn):
    COMPONENT_CLASSES = {"fidelity-gauge--all", "fidelity-gauge--good", "fidelity-gauge--fair",
                         "fidelity-gauge--poor", "fidelity-gauge--empty", "fidelity-gauge--label",
                         "fidelity-gauge--dim", "fidelity-gauge--loop"}
    DEFAULT_CSS = """
    FidelityGauge { width: 34; height: 4; padding: 0 1; background: $surface; }
    FidelityGauge .fidelity-gauge--all { color: $primary; }
    FidelityGauge .fidelity-gauge--good { color: $gauge-safe; }
    FidelityGauge .fidelity-gauge--fair { color: $gauge-soft; }
    FidelityGauge .fidelity-gauge--poor { color: $gauge-hard; }
    FidelityGauge .fidelity-gauge--empty { color: $faint; }
    FidelityGauge .fidelity-gauge--label { text-style: bold; }
    FidelityGauge .fidelity-gauge--dim { color: $muted; }
    FidelityGauge .fidelity-gauge--loop { color: $gauge-hard; text-style: bold; }
    """

    def __init__(self, id: str | None = None, hint: str = "f: list"):
        super().__init__(id=id)
        self.hint = hint   # the key that lists the facts, where the screen has one
        self.run: FidelityRun | None = None
        self.loops: list[Loop] = []
        self.turn = 1

    def show(self, run: FidelityRun | None, loops: list[Loop], turn: int) -> None:
        self.run, self.loops, self.turn = run, loops, turn
        self.tooltip = "\n".join(f"⟳ {loop.text}: {loop.meaning}" for loop in loops) or None
        self.redraw()

    def set_turn(self, turn: int) -> None:
        self.turn = turn
        self.redraw()

    def figures(self) -> tuple[float | None, float | None, int]:
        """(recall of every fact, recall of the pinned ones, facts lost at this turn)."""
        run, k = self.run, self.turn
        if run is None:
            return None, None, 0
        return run.recall_at(k), run.pinned_at(k), len(run.lost_at(k)) if k <= run.turns else 0

    def _c(self, name: str):
        return self.get_component_rich_style(f"fidelity-gauge--{name}", partial=True)

    def draw(self) -> Text:
        out = Text()
        if self.run is None:
            out.append("facts kept\n", style=self._c("label"))
            out.append("measuring what each request\nstill carries…", style=self._c("dim"))
            return out
        recall, pinned, lost = self.figures()
        out.append("facts kept", style=self._c("label"))
        out.append(f" · turn {self.turn}", style=self._c("dim"))
        if self.loops:
            loops = "loop" if len(self.loops) == 1 else f"{len(self.loops)} loops"
            out.append(f"  ⟳ {loops}", style=self._c("loop"))
        out.append("\n")
        # most facts are meant to go (that is what compaction is for): only the pinned ones are judged
        self._row(out, "all   ", recall, "all")
        self._row(out, "pinned", pinned)
        if lost:
            out.append(f"lost here {lost}", style=self._c("poor") + self._c("label"))
        else:
            out.append("nothing lost here", style=self._c("dim"))
        if self.hint:
            out.append(f" · {self.hint}", style=self._c("dim"))
        return out

    def _row(self, out: Text, label: str, value: float | None, colour: str | None = None) -> None:
        out.append(f"{label} ", style=self._c("dim"))
        if value is None:
            beyond = self.run is not None and self.turn > self.run.turns
            out.append("—  (the next request)\n" if beyond else "—  no facts yet\n", style=self._c("dim"))
            return
        style = self._c(colour or ("good" if value >= GOOD else "fair" if value >= FAIR else "poor"))
        out.append(f"{percent(value):>4} ", style=style + self._c("label"))
        eighths = round(value * BAR_CELLS * 8)
        full, part = divmod(eighths, 8)
        bar = "█" * full + (EIGHTHS[part] if part else "")
        out.append(bar, style=style)
        out.append("░" * (BAR_CELLS - len(bar)), style=self._c("empty"))
        out.append("\n")
