"""What the A/B view draws beside the list: the two wallets on one chart and the totals of each.

The chart is braille dots (2×4 per cell) rather than a plotting library: two monotone curves
need no axes engine, each column maps straight to turns, and the colours are theme variables
like every other span colour of the workbench.
"""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events
from textual.widget import Widget

from breakwater.core.compare import Comparison, Totals
from breakwater.core.figures import money, tokens_figure
from breakwater.ui.messages import TurnChosen

BRAILLE = 0x2800
DOT = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))  # [row][col] within one cell
LABEL = 9


def cumulative(values: list[int]) -> list[int]:
    out, total = [], 0
    for v in values:
        total += v
        out.append(total)
    return out


class BilledChart(Widget):
    """Tokens billed so far, per turn, under A and under B (and without compaction, for scale)."""

    COMPONENT_CLASSES = {"billed-chart--a", "billed-chart--b", "billed-chart--both", "billed-chart--raw",
                         "billed-chart--cursor", "billed-chart--dim"}
    DEFAULT_CSS = """
    BilledChart { height: 10; }
    BilledChart .billed-chart--a { color: $primary; }
    BilledChart .billed-chart--b { color: $warning; }
    BilledChart .billed-chart--both { color: $success; }
    BilledChart .billed-chart--raw { color: $text-disabled; }
    BilledChart .billed-chart--cursor { background: $boost; text-style: bold; }
    BilledChart .billed-chart--dim { color: $text-muted; }
    """

    def __init__(self, id: str | None = None):
        super().__init__(id=id)
        self.comparison: Comparison | None = None
        self.turn = 1

    def show(self, comparison: Comparison | None, turn: int) -> None:
        self.comparison, self.turn = comparison, turn
        self.refresh()

    def set_turn(self, turn: int) -> None:
        self.turn = turn
        self.refresh()

    def _c(self, name: str):
        return self.get_component_rich_style(f"billed-chart--{name}", partial=True)

    def _geometry(self) -> tuple[int, int, int]:
        """(columns, rows, turns) of the plot area."""
        n = len(self.comparison.a.turns) if self.comparison else 0
        return max(4, self.size.width - LABEL - 1), max(2, self.size.height - 2), n

    def turn_at(self, x: int) -> int | None:
        cols, _, n = self._geometry()
        if not n:
            return None
        col = max(0, min(cols - 1, x - LABEL))
        return max(1, min(n, round(col * 2 / max(1, 2 * cols - 1) * (n - 1)) + 1))

    def render(self) -> Text:
        c = self.comparison
        if c is None:
            return Text("simulating both policies…", style=self._c("dim"))
        cols, rows, n = self._geometry()
        if not n:
            return Text("this session has no model requests yet", style=self._c("dim"))
        series = {"a": cumulative([t.sent_tokens for t in c.a.turns]),
                  "b": cumulative([t.sent_tokens for t in c.b.turns])}
        top = max(series["a"][-1], series["b"][-1], 1)
        dots_x, dots_y = 2 * cols, 4 * rows
        cells: dict[tuple[int, int], list[int]] = {}   # (row, col) -> [bits, owners]
        for owner, values in enumerate(series.values(), start=1):
            prev = None
            for dx in range(dots_x):
                i = round(dx / max(1, dots_x - 1) * (n - 1))
                dy = round(values[i] / top * (dots_y - 1))
                lo, hi = (dy, dy) if prev is None else (min(prev, dy), max(prev, dy))
                for y in range(lo, hi + 1):  # join steep steps so the curve stays a line
                    row, col = rows - 1 - y // 4, dx // 2
                    cell = cells.setdefault((row, col), [0, 0])
                    cell[0] |= DOT[3 - y % 4][dx % 2]
                    cell[1] |= owner
                prev = dy
        cursor = round((self.turn - 1) / max(1, n - 1) * (cols - 1)) if n > 1 else 0
        style_of = {1: self._c("a"), 2: self._c("b"), 3: self._c("both")}
        lines = []
        for row in range(rows):
            label = _short(top) if row == 0 else ("0" if row == rows - 1 else "")
            line = Text(f"{label:>{LABEL - 1}} ", style=self._c("dim"))
            for col in range(cols):
                bits, owners = cells.get((row, col), (0, 0))
                style = style_of.get(owners)
                if col == cursor:
                    style = (style or self._c("dim")) + self._c("cursor")
                line.append(chr(BRAILLE + bits) if bits else (" " if col != cursor else "│"), style)
            lines.append(line)
        k = min(self.turn, n)
        legend = Text(" " * LABEL)
        legend.append("⣿ A", style=self._c("a"))
        legend.append(f" {series['a'][k - 1]:,}  ", style=self._c("dim"))
        legend.append("⣿ B", style=self._c("b"))
        legend.append(f" {series['b'][k - 1]:,}  ", style=self._c("dim"))
        legend.append("⣿ both", style=self._c("both"))
        legend.append(f"  billed up to turn {k} of {n}; click to go to a turn", style=self._c("dim"))
        lines.append(legend)
        return Text("\n").join(lines)

    def on_click(self, event: events.Click) -> None:
        turn = self.turn_at(event.x)
        if turn is not None:
            self.post_message(TurnChosen(turn))


NARROW = 110   # columns under which the totals leave out the billing without compaction


class CompareTotals(Widget):
    """The wallet of each policy over the whole session, and B minus A."""

    DEFAULT_CSS = "CompareTotals { height: auto; }"

    def __init__(self, id: str | None = None):
        super().__init__(id=id)
        self.comparison: Comparison | None = None
        self.recall: dict[str, tuple[float | None, float | None]] = {}   # side -> (recall, pinned recall)

    def show(self, comparison: Comparison | None) -> None:
        self.comparison = comparison
        self.recall = {}
        self.refresh(layout=True)

    def show_recall(self, side: str, recall: float | None, pinned: float | None) -> None:
        """What side "A" or "B" keeps over the whole session (`eval`'s recall and pinned recall)."""
        self.recall[side] = (recall, pinned)
        self.refresh(layout=True)

    def render(self):
        c = self.comparison
        if c is None:
            return Text("")
        table = Table(box=None, pad_edge=False, expand=True, header_style="bold")
        # figures never wrap (a header may): the table stays three rows high at 120 columns; narrower,
        # the billing without compaction (the same for A and B, and in the chart) makes room for them
        ta, tb = c.totals
        wide = self.size.width == 0 or self.size.width >= NARROW
        columns = ["", "preset · window", *(["billed without"] if wide else []), "billed with", "saved",
                   "deep compactions", "turns in hard zone", "facts kept", "pinned"]
        for col in columns:
            table.add_column(col, justify="left" if col in ("", "preset · window") else "right",
                             no_wrap=col not in ("", "deep compactions", "turns in hard zone", "facts kept"))
        for name, sim, tot in (("A", c.a, ta), ("B", c.b, tb)):
            recall, pinned = self.recall.get(name, (None, None))
            table.add_row(name, f"{sim.policy.preset} · {sim.policy.window:,}",
                          *([f"≈{tot.billed_raw:,}"] if wide else []),
                          tokens_figure(tot.billed_sent, tot.billed_sent_estimated),
                          f"≈{tot.saved:,} ({tot.saved_pct:.0f}%)", str(tot.compactions),
                          str(tot.hard_turns), _pct(recall, name in self.recall), _pct(pinned, name in self.recall))
        table.add_row("B − A", "", *([f"{tb.billed_raw - ta.billed_raw:+,}"] if wide else []),
                      f"{tb.billed_sent - ta.billed_sent:+,}", _pct_delta(ta, tb), f"{tb.compactions - ta.compactions:+}",
                      f"{tb.hard_turns - ta.hard_turns:+}", *(_pt_delta(self.recall, k) for k in (0, 1)))
        money_lines = _money_lines(c, self.app.current_theme.warning or "bold")
        return Group(table, money_lines) if money_lines else table


def _money_lines(c: Comparison, warning: str) -> Text | None:
    """Input USD through the provider's prompt cache, without → with compaction, and what compaction made it
    write again (core Simulation.cache_note: the timeline's words), for each side; None without prices."""
    ta, tb = c.totals
    if ta.cost_raw is None or tb.cost_raw is None:
        return None
    delta = tb.cost_sent - ta.cost_sent
    text = Text()
    text.append("input USD through the prompt cache, without → with compaction", style="bold")
    text.append(f"   B − A: {'+' if delta >= 0 else '−'}{money(abs(delta))}")
    for name, sim, tot in (("A", c.a, ta), ("B", c.b, tb)):
        note = sim.cache_note()
        text.append(f"\n{name}: {money(tot.cost_raw)} → {money(tot.cost_sent)}", style="")
        if note:
            text.append(f" · {note}", style=warning if sim.costs_more else "")
    return text


def _pct(value: float | None, measured: bool) -> str:
    if not measured:
        return "…"
    return "—" if value is None else f"{100 * value:.1f}%"


def _pt_delta(recall: dict[str, tuple[float | None, float | None]], k: int) -> str:
    a, b = recall.get("A", (None, None))[k], recall.get("B", (None, None))[k]
    return "" if a is None or b is None else f"{100 * (b - a):+.1f} pt"


def _pct_delta(ta: Totals, tb: Totals) -> str:
    return f"{tb.saved - ta.saved:+,} ({tb.saved_pct - ta.saved_pct:+.1f} pt)"


def _short(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else (f"{n / 1e3:.0f}k" if n >= 1e3 else str(n))


__all__ = ["BilledChart", "CompareTotals", "cumulative"]
