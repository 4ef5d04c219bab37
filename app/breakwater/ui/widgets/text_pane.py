"""A scrolling, soft-wrapped view of one long text with highlighted character spans, on the line
API: only the rows on screen are styled and drawn, so a 10 MB tool output opens at once.

Row positions come from a prefix sum of per-line row counts; a line holding double-width
characters (CJK) wraps at half the width, so every row fits and nothing is cut off.
"""

from __future__ import annotations

import bisect
from array import array
from itertools import accumulate

from rich.cells import cell_len
from rich.text import Text
from textual.cache import LRUCache
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from breakwater.core.log.visible import visible
from breakwater.ui.widgets.badges import ALL_KINDS


class TextPane(ScrollView, can_focus=True):
    """`spans` are (start, end, edit kind) over `text`, drawn in the kind's theme colour."""

    COMPONENT_CLASSES = {f"text-pane--{k}" for k in (*ALL_KINDS, "label")}

    def __init__(self, id: str | None = None, classes: str | None = None):
        super().__init__(id=id, classes=classes)
        self.text = ""
        self.spans: list[tuple[int, int, str]] = []
        self._line_starts = array("q", [0])
        self._row_starts = array("q", [0, 1])   # prefix sum of rows per line
        self._wrap_width = 0
        self._narrow: set[int] = set()
        self._strips: LRUCache[tuple[int, int], Strip] = LRUCache(512)

    def set_text(self, text: str, spans: list[tuple[int, int, str]] | None = None) -> None:
        text = visible(text)     # one character for one: the spans still fit
        spans = sorted(spans or [])
        if text == self.text and spans == self.spans:
            return   # a step to the next turn often leaves a message as it was: keep its rows and scroll
        self.text = text
        self.spans = spans
        starts = array("q", [0])
        find = text.find
        pos = find("\n")
        while pos != -1:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        self._line_starts = starts
        self._wrap_width = 0
        self._strips.clear()
        self.scroll_to(0, 0, animate=False, immediate=True)
        self._layout_rows()

    def _line_span(self, line: int) -> tuple[int, int]:
        start = self._line_starts[line]
        end = self._line_starts[line + 1] - 1 if line + 1 < len(self._line_starts) else len(self.text)
        return start, end

    def _layout_rows(self) -> None:
        width = max(8, self.scrollable_content_region.width or self.size.width or 80)
        if width == self._wrap_width:
            return
        self._wrap_width = width
        starts, text = self._line_starts, self.text
        ends = [e - 1 for e in starts[1:]] + [len(text)]
        half = max(4, width // 2)
        self._narrow = {i for i, (s, e) in enumerate(zip(starts, ends))
                        if not text[s:e].isascii() and cell_len(text[s:e]) > e - s}
        narrow = self._narrow
        rows = (max(1, -(-(e - s) // (half if i in narrow else width))) for i, (s, e) in enumerate(zip(starts, ends)))
        self._row_starts = array("q", accumulate(rows, initial=0))
        self._strips.clear()
        self.virtual_size = Size(width, self._row_starts[-1])
        self.refresh()

    def on_resize(self) -> None:
        self._layout_rows()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        row = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if row >= self._row_starts[-1]:
            return Strip.blank(width, self.rich_style)
        key = (row, width)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._strips[key] = self._render_row(row, width)
        return strip

    def _render_row(self, row: int, width: int) -> Strip:
        line = bisect.bisect_right(self._row_starts, row) - 1
        start, end = self._line_span(line)
        chunk_width = max(4, self._wrap_width // 2) if line in self._narrow else self._wrap_width
        a = start + (row - self._row_starts[line]) * chunk_width
        b = min(end, a + chunk_width)
        chunk = self.text[a:b].replace("\t", "    ")
        text = Text(chunk, no_wrap=True, overflow="crop", end="")
        for s, e, kind in self.spans:   # sorted by start
            if s >= b:
                break
            if e > a:
                text.stylize(self.get_component_rich_style(f"text-pane--{kind}", partial=True),
                             max(0, s - a), min(b, e) - a)
        base = self.rich_style
        return Strip(list(text.render(self.app.console))).apply_style(base).adjust_cell_length(width, base)
