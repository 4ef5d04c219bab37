"""A small widget drawn from one Rich `Text` through the line API.

Any relayout of the screen repaints every widget; a `render()` returning a `Text` would be
converted and laid out again each time (a few ms for the timeline's thousand spans). Here the
text is laid out into strips once per (version, size, theme) and repaints are lookups.
"""

from __future__ import annotations

from typing import Iterable

from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget


class Drawn(Widget):
    WRAP = False   # fold long lines (else cut them with an ellipsis)

    def __init__(self, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self._version = 0
        self._strips_key: tuple | None = None
        self._strips: list[Strip] = []

    def draw(self) -> Text | list[Text | Strip]:
        raise NotImplementedError

    def redraw(self) -> None:
        """The inputs changed: lay the text out again at the next repaint."""
        self._version += 1
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips_key = None

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        key = (self._version, self.size, self.app.theme)
        if key != self._strips_key:
            drawn = self.draw()
            # a list holds lines, some of them strips the widget kept from an earlier repaint
            parts = [drawn] if isinstance(drawn, Text) else drawn
            self._strips = [s for part in parts for s in ([part] if isinstance(part, Strip) else self.strips(part))]
            self._strips_key = key
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, self.rich_style)

    def strips(self, text: Text) -> list[Strip]:
        """Text laid out at the widget's width, as its lines are drawn."""
        width, console = self.size.width, self.app.console
        text.no_wrap = not self.WRAP
        text.overflow = "fold" if self.WRAP else "ellipsis"
        lines = console.render_lines(text, console.options.update(width=width, height=None, no_wrap=not self.WRAP),
                                     pad=False)
        base = self.rich_style
        return [Strip(line).apply_style(base).adjust_cell_length(width, base) for line in lines]


def runs(cells: Iterable[tuple[str, Style | None]]) -> Text:
    """Cells as text with one span per run of equally styled cells: Rich lays a line out span by
    span, and a chart drawn a span per cell costs tens of milliseconds a repaint."""
    text = Text(no_wrap=True, end="")
    buf: list[str] = []
    current: Style | None = None
    for ch, style in cells:
        if buf and style != current:
            text.append("".join(buf), current)
            buf = []
        current = style
        buf.append(ch)
    if buf:
        text.append("".join(buf), current)
    return text
