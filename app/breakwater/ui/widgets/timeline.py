"""The timeline: per turn, raw tokens (light, clipped at the window) and sent tokens (solid, zone
colour) as block-character columns, the soft and hard limits as lines, a ▼ over every deep compaction; below, the
billed tokens with and without compaction (the "wallet" of seed 000). Click or drag to scrub.

Drawn with block characters rather than a plotting library: each column maps straight to its
turns for scrubbing, the colours come from the theme, and it costs O(width × height) per change.
"""

from __future__ import annotations

from itertools import accumulate

from rich.text import Text
from textual import events
from textual.strip import Strip

from breakwater.core.figures import tokens_figure
from breakwater.core.log.words import plural
from breakwater.core.simulate import Simulation
from breakwater.ui.messages import TurnChosen
from breakwater.ui.widgets.drawn import Drawn, runs

EIGHTHS = " ▁▂▃▄▅▆▇█"


class Timeline(Drawn):
    COMPONENT_CLASSES = {"timeline--safe", "timeline--soft", "timeline--hard", "timeline--raw",
                         "timeline--limit-soft", "timeline--limit-hard", "timeline--compaction",
                         "timeline--cursor", "timeline--dim", "timeline--warning"}

    def __init__(self, id: str | None = None):
        super().__init__(id=id)
        self.simulation: Simulation | None = None
        self.origins: dict[str, int] = {}   # the log's compactions by who made them (core Replay.recorded_origins)
        self.turn = 1
        self.progress: tuple[int, int] | None = None
        self._cols_key: tuple | None = None
        self._cols: list[tuple] = []
        self._billed: tuple[list[int], list[int]] = ([0], [0])   # billed raw and sent up to each turn
        self._dropping = 0
        self._chart_key: tuple | None = None
        self._chart: list[Strip] = []

    def show(self, simulation: Simulation | None, turn: int) -> None:
        self.simulation, self.turn = simulation, turn
        self.redraw()

    def set_turn(self, turn: int) -> None:
        self.turn = turn
        self.redraw()

    def _c(self, name: str):
        return self.get_component_rich_style(f"timeline--{name}", partial=True)

    def _spans(self) -> list[tuple[int, int]]:
        """For each column of the chart, the turns it stands for ([start, end) indices): the turns
        are spread over the whole width, several to a column or several columns to a turn."""
        n = len(self.simulation.turns)
        width = max(10, self.size.width - 9)
        return [(c * n // width, max(c * n // width + 1, (c + 1) * n // width)) for c in range(width)]

    def turn_at(self, x: int) -> int | None:
        sim = self.simulation
        if not sim or not sim.turns:
            return None
        spans = self._spans()
        col = max(0, min(len(spans) - 1, x - 8))
        return spans[col][0] + 1

    def draw(self) -> Text | list[Text | Strip]:
        sim = self.simulation
        if sim is None:
            if self.progress:
                done, total = self.progress
                return Text(f"simulating every turn… {done:,}/{total:,}", style=self._c("dim"))
            return Text("simulating every turn…", style=self._c("dim"))
        if not sim.turns:
            return Text("this session has no model requests yet", style=self._c("dim"))
        # under the chart: the wallet, the session's counts, what compaction re-wrote in the cache (when priced), the legend
        note = sim.cache_note()
        height = max(2 if note else 3, self.size.height - 4 - bool(note))
        p = sim.policy
        cols = self._columns(sim)
        # the scale is the window (or the largest request), not the raw history: raw can be 10× the
        # window, and the limits and what is sent are what matter; raw taller than that is clipped
        peak = max(max(c[1] for c in cols), p.window)
        units = height * 8
        soft_row = round(p.soft_limit / peak * units) // 8
        hard_row = round(p.hard_limit / peak * units) // 8
        cur = {i for i, col in enumerate(cols) if col[4] <= self.turn <= col[5]}
        # a column stands for many turns in a long session: most steps leave the chart as it was
        chart_key = (self._cols_key, frozenset(cur), height, self.app.theme)
        if chart_key != self._chart_key:
            self._chart = self.strips(self._chart_text(cols, cur, peak, height, units, soft_row, hard_row))
            self._chart_key = chart_key
        return [*self._chart, self._wallet(sim, note), self._legend()]

    def _chart_text(self, cols, cur, peak, height, units, soft_row, hard_row) -> Text:
        p = self.simulation.policy
        lines: list[Text] = []
        # the mark row: compactions and the cursor
        cursor, compaction = self._c("cursor"), self._c("compaction")
        mark = Text(" " * 8)
        mark.append_text(runs((col[3] or "↓", cursor) if i in cur else (col[3] or " ", compaction)
                              for i, col in enumerate(cols)))
        lines.append(mark)
        zones = {z: self._c(z) for z in ("safe", "soft", "hard")}
        raw_style, soft_style, hard_style = self._c("raw"), self._c("limit-soft"), self._c("limit-hard")
        for r in range(height - 1, -1, -1):
            label = ""
            if r == soft_row:
                label = "soft"
            elif r == hard_row:
                label = "hard"
            elif r == height - 1:
                label = "window" if peak == p.window else _short(peak)
            line = Text(f"{label:>7} ", style=self._c("dim"))
            cells = []
            for i, (raw, sent, zone, _, _, _) in enumerate(cols):
                s8 = round(sent / peak * units) - r * 8
                r8 = round(raw / peak * units) - r * 8
                if s8 > 0:
                    ch, style = EIGHTHS[min(8, s8)], zones.get(zone) or self._c(zone)
                elif r8 > 0:
                    ch, style = "░", raw_style
                elif r == soft_row:
                    ch, style = "╌", soft_style
                elif r == hard_row:
                    ch, style = "╌", hard_style
                else:
                    ch, style = " ", None
                if i in cur:
                    style = (style or cursor) + cursor
                cells.append((ch, style))
            line.append_text(runs(cells))
            lines.append(line)
        return Text("\n").join(lines)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._chart_key = None

    def _columns(self, sim: Simulation) -> list[tuple]:
        """Per column: (raw, sent, zone, a compaction in it, first turn, last turn); worked out once
        per simulation and width, so a step (a new cursor) only redraws."""
        key = (id(sim), len(sim.turns), self.size.width)
        if key != self._cols_key:
            cols = []
            for a, b in self._spans():
                group = sim.turns[a:b]
                top = max(group, key=lambda t: t.sent_tokens)
                sources = {t.compaction_source for t in group if t.compaction}
                cols.append((max(t.raw_tokens for t in group), top.sent_tokens, top.zone,
                             ("▼" if "decided" in sources else "▽") if sources else None, a + 1, b))
            self._cols, self._cols_key = cols, key
            self._billed = (list(accumulate((t.raw_tokens for t in sim.turns), initial=0)),
                            list(accumulate((t.sent_tokens for t in sim.turns), initial=0)))
            # requests that leave messages out without a summary (shaped out, or invalid ones)
            self._dropping = sum(1 for t in sim.turns if t.edits.get("dropped"))
        return self._cols

    def set_progress(self, done: int, total: int) -> None:
        self.progress = (done, total)
        if self.simulation is None:   # else the chart stays as it is until the new one is ready
            self.redraw()

    def _legend(self) -> Text:
        text = Text(" █", style=self._c("safe"))
        text.append("█", style=self._c("soft"))
        text.append("█", style=self._c("hard"))
        text.append(" sent, coloured by the history's zone (safe · soft · hard)  ", style=self._c("dim"))
        text.append("░", style=self._c("raw"))
        text.append(" raw, without compaction  ", style=self._c("dim"))
        text.append("▼", style=self._c("compaction"))
        text.append(" deep compaction", style=self._c("dim"))
        if self.simulation is not None and self.simulation.recorded:
            text.append(" ▽", style=self._c("compaction"))
            text.append(" recorded", style=self._c("dim"))
        text.append("  ↓ this turn  click or drag to scrub", style=self._c("dim"))
        return text

    def _wallet(self, sim: Simulation, note: str | None) -> Text:
        k = min(self.turn, len(sim.turns))
        self._columns(sim)
        raw_k, sent_k = self._billed[0][k], self._billed[1][k]
        billed_raw, billed_sent = self._billed[0][-1], self._billed[1][-1]
        total_saved = sim.saved   # like for like, as simulate --json totals it
        pct = 100 * total_saved / billed_raw if billed_raw else 0
        text = Text(" billed ", style=self._c("dim"))
        text.append(f"without compaction ≈{billed_raw:,} · with {tokens_figure(billed_sent, sim.billed_sent_estimated)} · "
                    f"saved ≈{total_saved:,} "
                    f"({pct:.0f}%)")
        if sim.prices is not None:   # cache-aware (core/log/accounting.py): a policy that breaks the cache can cost more
            text.append(f" · ${sim.cost_raw:,.2f} → ${sim.cost_sent:,.2f}")
        # the agent's own compactions (recorded in an imported transcript) are re-applied on replay
        # and marked ▼ like this policy's: counted together, as simulate --json totals them
        recorded = len(sim.recorded)
        deep = f"{plural(len(sim.compactions) + recorded, 'deep compaction')} ▼"
        if recorded:
            made = ", ".join(f"{n} {who}" for who, n in (self.origins or {"recorded in the transcript": recorded}).items())
            deep += f" ({len(sim.compactions)} by this policy, {made})"
        text.append(f" · to turn {k}: {raw_k:,} → {sent_k:,}", style=self._c("dim"))
        dropping = f"{plural(self._dropping, 'turn')} {'drops' if self._dropping == 1 else 'drop'} messages"
        text.append(f"\n {deep} · {dropping}", style=self._c("dim"))
        if note:   # what compaction made the provider write again (Simulation.cache_note); a warning where it costs more
            text.append(f"\n {note}", style=self._c("warning" if sim.costs_more else "dim"))
        return text

    def on_click(self, event: events.Click) -> None:
        self._scrub(event.x)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if event.button == 1:
            self._scrub(event.x)

    def _scrub(self, x: int) -> None:
        turn = self.turn_at(x)
        if turn is not None:
            self.post_message(TurnChosen(turn))


def _short(n: int) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else (f"{n / 1e3:.0f}k" if n >= 1e3 else str(n))
