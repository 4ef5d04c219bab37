"""The gauges: tokens sent at the current turn against the window, the soft and hard limits marked
on the bar, the bar's colour following the zone, the unseen overhead (the provider's system prompt
and tools) as its own block; beside it the counts SPEC §2 names (heuristic, exact, last API figure,
the fitted calibration), the request without compaction and what compaction saves. Every figure is
the core's (core/log/accounting.py): drawn, never worked out here."""

from __future__ import annotations

from rich.text import Text

from breakwater.core.replay import TurnDetail
from breakwater.core.simulate import TurnStats, provider_figure
from breakwater.core.fold.cache_worth import CACHE_WAITS
from breakwater.core.stages.deep_compaction import WAITS
from breakwater.ui.widgets.drawn import Drawn, runs

ZONE_TEXT = {"safe": "safe zone", "soft": "soft zone", "hard": "hard zone"}


class Gauges(Drawn):
    COMPONENT_CLASSES = {"gauges--safe", "gauges--soft", "gauges--hard", "gauges--empty", "gauges--label",
                         "gauges--dim"}

    def __init__(self, id: str | None = None):
        super().__init__(id=id)
        self.detail: TurnDetail | None = None
        self.stats: TurnStats | None = None
        self.first_look = False   # figures by the heuristic counter, drawn while the exact pass runs

    def show(self, detail: TurnDetail | None, stats: TurnStats | None, first_look: bool = False) -> None:
        self.detail, self.stats, self.first_look = detail, stats, first_look
        self.redraw()

    def _c(self, name: str):
        return self.get_component_rich_style(f"gauges--{name}", partial=True)

    def draw(self) -> Text:
        d = self.detail
        if d is None:
            return Text("computing the request…", style=self._c("dim"))
        v = d.view
        mark = "≈" if v.estimated else ""
        zone_style = self._c(v.zone)
        out = Text()
        # the verdict and the zone first: a narrow gauge cuts the end of a line, never these (37.8)
        if not v.fits:
            out.append("DOES NOT FIT THE WINDOW", style=self._c("hard") + self._c("label"))
            out.append(" · ")
        out.append(ZONE_TEXT.get(v.zone, v.zone), style=zone_style + self._c("label"))
        out.append(" · ")
        out.append("sent ", style="bold")
        out.append(f"{mark}{v.sent_tokens:,}", style=zone_style + self._c("label"))
        out.append(f" of window {v.window:,}")
        out.append(f" ({d.window_source})", style=self._c("dim"))
        # with no usage recorded the figure is the heuristic's and the verdict the tokenizer's (near the
        # limits): where they fall either side of the window, say which decided
        if v.fits and v.sent_tokens > v.window:
            out.append(" · fits by the tokenizer's count", style=zone_style)
        elif not v.fits and v.sent_tokens <= v.window:
            out.append(" · past the window by the tokenizer's count", style=self._c("hard"))
        out.append(" · " + self._what_ran(), style=self._c("dim"))
        out.append("\n")
        out.append_text(self._bar(v, max(20, self.size.width - 2), unseen_overhead(d)))
        out.append("\n")
        self._counts(out, d)
        return out

    def figures(self) -> Text:
        """Every line of the gauges but the bar, whole: the x view wraps what a narrow gauge cuts."""
        if self.detail is None:
            return Text()
        lines = self.draw().split("\n")
        return Text("\n").join(line for k, line in enumerate(lines) if k != 1)

    def _what_ran(self) -> str:
        """What the pipeline did for this request, in words."""
        st, d = self.stats, self.detail
        done = []
        if st is not None and st.compaction:
            done.append("deep compaction made here")
        elif d is not None and d.summary is not None:
            done.append("an earlier summary in effect")
        if st is not None and st.level != "none":
            done.append(f"stages up to {st.level}")
        if d is not None and any(note.startswith(WAITS) for note in d.view.notes):
            done.append("compaction waits: no summary gets this request under the soft limit")
        # a step the cache model held back (core/fold/cache_worth.py): over the soft limit, and why
        done += [note for note in (d.view.notes if d is not None else ()) if CACHE_WAITS in note]
        return ", ".join(done) if done else "sent as is"

    def _bar(self, v, width: int, overhead: int = 0) -> Text:
        """The window as a bar: the unseen overhead ▓, the rest sent solid, the history before the
        stages shaded, limits as ┃."""
        scale = width / max(1, v.window)
        unseen = min(width, round(max(0, overhead) * scale))
        sent = min(width, round(v.sent_tokens * scale))
        base = min(width, round(v.base_tokens * scale))
        soft_at = min(width - 1, round(v.soft_limit * scale))
        hard_at = min(width - 1, round(v.hard_limit * scale))
        zone, empty = self._c(v.zone), self._c("empty")
        marks = {soft_at: self._c("soft") + self._c("label"), hard_at: self._c("hard") + self._c("label")}
        return runs(("┃", marks[x]) if x in marks else ("▓", zone) if x < unseen else ("█", zone) if x < sent
                    else ("▒", zone) if x < base else ("░", empty) for x in range(width))

    def _counts(self, out: Text, d: TurnDetail) -> None:
        v = d.view
        dim = self._c("dim")
        p = d.view
        # the provider's figure first, with the request it belongs to (this one, or an earlier one:
        # 37.10) and whether it is above the window in use (37.9); the session list shows the same
        api = provider_figure(v, self.stats)
        out.append("API ", style=dim)
        if api is None:
            out.append("—")
        else:
            out.append(f"{api.tokens:,}", style=self._c("hard") + self._c("label") if api.above_window else None)
            # billed for the request as the agent sent it, not for the one this policy builds
            if api.own:
                out.append(" (recorded at this turn)", style=dim)
            elif api.turn is not None:
                out.append(f" (recorded at turn {api.turn})", style=dim)
            if api.above_window:
                out.append(f" ABOVE THE WINDOW {v.window:,}", style=self._c("hard") + self._c("label"))
        out.append(" · heuristic ", style=dim)
        out.append(f"≈{d.heuristic_tokens:,}")
        out.append(" · exact ", style=dim)
        out.append(f"{d.exact_tokens:,} ({d.encoding})" if d.exact_tokens is not None
                   else "counting…" if self.first_look
                   else "not counted (heuristic counter)" if d.counter == "heuristic" else "≈ unknown model")
        # ▓ is the unseen overhead's glyph on the bar: where there is none (a proxied session's log holds
        # the whole request; no usage fitted yet) the bar has none, and neither has its legend
        out.append(" · ▓ " if unseen_overhead(d) else " · ", style=dim)
        out.append(d.calibration.describe())
        out.append("\n")
        out.append(f"soft limit {p.soft_limit:,} · hard limit {p.hard_limit:,} · ", style=dim)
        out.append("without compaction ", style=dim)
        out.append(f"≈{v.raw_tokens:,}")
        if v.raw_tokens:
            saved = v.raw_tokens - v.sent_tokens   # both counted by one calibration (core/log/accounting.py)
            out.append(" · saved ", style=dim)
            out.append(f"≈{saved:,} ({100 * saved / v.raw_tokens:.0f}%)", style=self._c("safe"))
        if v.zone != "safe":   # why the zone is what it is: a detail, after the figures (the x view has it whole)
            out.append(f" · history before stages {v.base_tokens:,} > {v.zone} limit "
                       f"{v.soft_limit if v.zone == 'soft' else v.hard_limit:,}", style=dim)
        prefix = getattr(v, "stable_prefix_tokens", None)
        if prefix is None and self.stats is not None:
            prefix = getattr(self.stats, "stable_prefix_tokens", None)
        if prefix is not None:
            out.append(" · cache-stable prefix ", style=dim)
            out.append(f"≈{prefix:,}")
        st = self.stats
        if st is not None and st.cost_sent is not None:
            out.append(" · cost ", style=dim)
            out.append(f"${st.cost_sent:.4f} (without ${st.cost_raw:.4f})")


def unseen_overhead(d: TurnDetail) -> int:
    """The provider's tokens of the request no message shows (the bar's ▓): none for a whole request."""
    return 0 if d.calibration.whole else max(0, d.calibration.overhead)
