"""One line under the gauges: the request of the turn shown, by category (core/context_categories.py
computes it; `x` opens the full view)."""

from __future__ import annotations

from rich.text import Text

from breakwater.core.context_categories import ContextCategories
from breakwater.ui.widgets.drawn import Drawn


class ContextLine(Drawn):
    DEFAULT_CSS = "ContextLine { height: 1; padding: 0 1; background: $surface; color: $text-muted; }"

    def __init__(self, id: str | None = None):
        super().__init__(id=id)
        self.categories: ContextCategories | None = None

    def show(self, categories: ContextCategories | None) -> None:
        self.categories = categories
        self.redraw()

    def draw(self) -> Text:
        if self.categories is None:
            return Text("context: …")
        return Text(self.categories.line() + "   (x: in full)")
