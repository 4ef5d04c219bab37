"""The request of one turn by category, in full (as Claude Code's /context): `x` on the replay screen."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from breakwater.core.context_categories import ContextCategories

BAR = 40


class ContextScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    ContextScreen { align: center middle; }
    ContextScreen #context-figures { padding: 0 0 1 0; }
    ContextScreen #context-body { width: 120; max-width: 95%; height: auto; max-height: 90%;
                                  border: round $primary; background: $surface; padding: 0 1; }
    """
    BINDINGS = [Binding("escape,q,x", "dismiss", "Close", id="context.close", tooltip="Back to the workbench")]

    def __init__(self, categories: ContextCategories, turn: int, figures: Text | None = None):
        super().__init__()
        self.categories = categories
        self.turn = turn
        self.figures = figures   # the gauges' lines, whole (a narrow gauge cuts their ends)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="context-body"):
            if self.figures is not None and self.figures.plain:
                yield Static(self.figures, id="context-figures")
            yield Static(self._table(), id="context-table")

    def on_mount(self) -> None:
        c = self.categories
        self.query_one("#context-body").border_title = (
            f"Context at turn {self.turn}: {c.used:,} of {c.window:,} tokens ({100 * c.used / c.window:.0f}%)"
            " — esc closes")

    def _table(self) -> Table:
        c = self.categories
        table = Table(expand=True, box=None, padding=(0, 1))
        table.add_column("category", style="bold", no_wrap=True)
        table.add_column("tokens", justify="right", no_wrap=True)
        table.add_column("", no_wrap=True)
        table.add_column("", style="dim")
        for name, tokens, note in c.rows():
            filled = round(BAR * tokens / c.window) if tokens else 0
            table.add_row(name, "?" if tokens is None else f"{tokens:,}", Text("█" * filled + "·" * (BAR - filled)),
                          note)
        return table
