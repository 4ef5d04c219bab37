"""One spill file on screen, at any size: a line-API view that reads only the rows it paints.

Workers index the file (the tail first, then the head), scan what is appended and search;
they post messages and this widget's handlers own the index. `render_line` reads a row
with `os.pread`, capped, and keeps the styled strips in an LRU.
"""

from __future__ import annotations

import os
import re
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.worker import get_current_worker

from breakwater.tools.spill_index import (LINE_CAP, LineBytes, LineIndex, display_text, human_size, open_spill,
                                          read_line, read_lines, scan_line_ends, tail_origin)
from breakwater.tools.spill_search import Hit, Query, search
from breakwater.ui.spill.messages import (FileFailed, FileReplaced, HeadIndexed, IndexProgress, LinesAppended,
                                          SearchFinished, TailIndexed)

TAIL_LINES = 2000
"""Lines indexed before the file is first shown: more than any screen holds."""

INLINE_SCAN = 256 << 10
"""Growth up to this many bytes is scanned on the UI thread; more goes to a worker."""

_MARKS = re.compile("[\u2400-\u2421\ufffd]+")


@dataclass(frozen=True)
class SpillStatus:
    """What the view is showing, for the pane's status line."""

    path: Path | None
    lines: int
    size: int
    numbered: bool
    indexed: float
    following: bool
    searching: str | None
    message: str


def _scan(fd: int, start: int, stop: int, cancelled: Callable[[], bool]) -> tuple[int, array]:
    ends, end = array("q"), start
    for end, chunk in scan_line_ends(fd, start, stop, cancelled=cancelled):
        ends.extend(chunk)
    return end, ends


def _appended(path: Path, generation: int, start: int, identity: tuple[int, int] | None) -> Message:
    """What became of the file since byte `start`: lines appended, replaced, or gone."""
    try:
        fd = open_spill(path)
    except OSError as exc:
        return FileFailed(generation, f"{path.name} is gone: {exc.strerror or exc}")
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != identity or st.st_size < start:
            return FileReplaced(generation)
        end, ends = _scan(fd, start, st.st_size, lambda: False)
        return LinesAppended(generation, start, end, ends)
    finally:
        os.close(fd)


class SpillView(ScrollView, can_focus=True, inherit_bindings=False):
    """The lines of one spill file, following it as it grows."""

    KEYS_NAME = "spill file"   # in the footer, before its keys

    BINDINGS = [
        Binding("up,k", "scroll_up", "Up", show=False, id="spill.up", tooltip="Scroll up one line"),
        Binding("down,j", "scroll_down", "Down", show=False, id="spill.down", tooltip="Scroll down one line"),
        Binding("left,h", "scroll_left", "Left", show=False, id="spill.left", tooltip="Scroll left"),
        Binding("right,l", "scroll_right", "Right", show=False, id="spill.right", tooltip="Scroll right"),
        Binding("pageup,b", "page_up", "Page up", show=False, id="spill.page-up", tooltip="Scroll up one page"),
        Binding("pagedown,space", "page_down", "Page down", show=False, id="spill.page-down",
                tooltip="Scroll down one page"),
        Binding("home,g", "top", "Top", show=False, id="spill.top", tooltip="Go to the first line"),
        Binding("end,G", "bottom", "Tail", id="spill.tail",
                tooltip="Go to the last line and follow the file as it grows"),
        Binding("f", "toggle_follow", "Follow", id="spill.follow",
                tooltip="Follow the file as it grows (on/off)"),
    ]

    COMPONENT_CLASSES = {
        "spill-view--line-number",
        "spill-view--match",
        "spill-view--current-match",
        "spill-view--cut",
        "spill-view--control",
    }

    DEFAULT_CSS = """
    SpillView {
        background: $surface;
        color: $foreground;
        scrollbar-gutter: stable;
        & > .spill-view--line-number { color: $text-muted; }
        & > .spill-view--match { background: $warning 35%; }
        & > .spill-view--current-match { background: $accent; color: $background; text-style: bold; }
        & > .spill-view--cut { color: $text-muted; text-style: italic; }
        & > .spill-view--control { color: $error; }
    }
    """

    following: reactive[bool] = reactive(True, init=False)

    class StatusChanged(Message):
        """The file, its size, the index or the search state changed."""

        def __init__(self, status: SpillStatus) -> None:
            self.status = status
            super().__init__()

    class Opened(Message):
        """A spill file is on screen at its tail."""

        def __init__(self, path: Path, lines: int) -> None:
            self.path = path
            self.lines = lines
            super().__init__()

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None):
        super().__init__(name=name, id=id, classes=classes)
        self.path: Path | None = None
        self.index: LineIndex | None = None
        self.query: Query | None = None
        self.hit: Hit | None = None
        self._fd: int | None = None
        self._identity: tuple[int, int] | None = None
        self._generation = 0
        self._strips: LRUCache[tuple, Strip] = LRUCache(maxsize=1024)
        self._rows: LRUCache[int, LineBytes] = LRUCache(maxsize=512)
        self._styles: dict[str | None, Style] = {}
        self._widest = 0
        self._indexed = 1.0
        self._extending = False
        self._more = False
        self._searching: str | None = None
        self._message = ""
        self._pending: Callable[[], None] | None = None

    # -- opening and indexing -------------------------------------------------------------

    def open(self, path: Path) -> None:
        """Show `path` at its tail (indexing runs in a worker) and follow it."""
        self._close()
        self._generation += 1
        self.path = Path(path)
        self.following = True
        self._indexed = 0.0
        self._message = "opening…"
        self._index_file(self.path, self._generation)
        self._post_status()

    def close(self) -> None:
        self._close()
        self.path = None
        self._generation += 1
        self.virtual_size = Size(0, 0)
        self.refresh()
        self._post_status()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd = None
        self.index = None
        self.hit = None
        self._identity = None
        self._widest = 0
        self._extending = self._more = False
        self._searching = None
        self._pending = None
        self._strips.clear()
        self._rows.clear()

    def on_unmount(self) -> None:
        self._close()

    @work(thread=True, exclusive=True, group="spill-index")
    def _index_file(self, path: Path, generation: int) -> None:
        worker = get_current_worker()
        try:
            fd = open_spill(path)
        except OSError as exc:
            self.post_message(FileFailed(generation, f"cannot open {path.name}: {exc.strerror or exc}"))
            return
        try:
            st = os.fstat(fd)
            origin = tail_origin(fd, st.st_size, TAIL_LINES)
            end, ends = _scan(fd, origin, st.st_size, lambda: worker.is_cancelled)
            self.post_message(TailIndexed(generation, (st.st_dev, st.st_ino), origin, end, ends))
            head = array("q")
            for scanned, chunk in scan_line_ends(fd, 0, origin, cancelled=lambda: worker.is_cancelled):
                head.extend(chunk)
                self.post_message(IndexProgress(generation, scanned, origin))
            if origin and not worker.is_cancelled:
                self.post_message(HeadIndexed(generation, head))
        except OSError as exc:
            self.post_message(FileFailed(generation, f"cannot read {path.name}: {exc.strerror or exc}"))
        finally:
            os.close(fd)

    @on(TailIndexed)
    def _tail_indexed(self, event: TailIndexed) -> None:
        if event.generation != self._generation or self.path is None:
            return
        try:
            self._fd = open_spill(self.path)
            st = os.fstat(self._fd)
        except OSError as exc:
            self._failed(f"cannot open {self.path.name}: {exc.strerror or exc}")
            return
        if (st.st_dev, st.st_ino) != event.identity:  # replaced since the worker read it
            self.open(self.path)
            return
        self._identity = event.identity
        self.index = LineIndex(event.origin)
        self.index.extend(event.ends, event.end)
        self._indexed = 1.0 if event.origin == 0 else 0.0
        self._message = ""
        self._resize_virtual()
        self._scroll_to_end()
        self.post_message(self.Opened(self.path, len(self.index)))
        self._post_status()
        if st.st_size > self.index.end:
            self.file_changed()

    @on(IndexProgress)
    def _index_progress(self, event: IndexProgress) -> None:
        if event.generation == self._generation and event.total:
            self._indexed = event.scanned / event.total
            self._post_status()

    @on(HeadIndexed)
    def _head_indexed(self, event: HeadIndexed) -> None:
        if event.generation != self._generation or self.index is None:
            return
        shift = self.index.prepend(event.ends)
        self._indexed = 1.0
        self._message = ""
        self._strips.clear()
        self._rows.clear()
        top = self.scroll_y
        self._resize_virtual()
        if self.following:
            self._scroll_to_end()
        else:
            self.scroll_to(y=top + shift, animate=False, force=True)
        self.refresh()
        self._post_status()
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending()

    @on(FileFailed)
    def _file_failed(self, event: FileFailed) -> None:
        if event.generation == self._generation:
            self._failed(event.reason)

    def _failed(self, reason: str) -> None:
        self._close()
        self.path = None
        self._message = reason
        self.virtual_size = Size(0, 0)
        self.refresh()
        self._post_status()

    # -- following ------------------------------------------------------------------------

    def file_changed(self) -> None:
        """The watcher saw the file change: scan what was appended (one scan at a time)."""
        if self.index is None or self.path is None:
            return
        if self._extending:
            self._more = True
            return
        self._extending, self._more = True, False
        try:
            grown = os.stat(self.path, follow_symlinks=False).st_size - self.index.end
        except OSError:
            grown = INLINE_SCAN + 1  # the worker reports why
        if grown <= INLINE_SCAN:
            # A few lines, the usual case while a tool streams: scanning them here costs less
            # than the hop to a thread and back.
            self.post_message(_appended(self.path, self._generation, self.index.end, self._identity))
        else:
            self._extend_file(self.path, self._generation, self.index.end, self._identity)

    @work(thread=True, group="spill-extend")
    def _extend_file(self, path: Path, generation: int, start: int, identity: tuple[int, int] | None) -> None:
        self.post_message(_appended(path, generation, start, identity))

    @on(LinesAppended)
    def _lines_appended(self, event: LinesAppended) -> None:
        if event.generation != self._generation or self.index is None:
            return
        self._extending = False
        if event.start == self.index.end and event.end > event.start:
            last = len(self.index) - 1
            self.index.extend(event.ends, event.end)
            # The last line may have been partial; it is the only cached row that can change.
            self._forget_line(last)
            self._resize_virtual()
            if self.following:
                self._scroll_to_end()
            self.refresh()
            self._post_status()
        if self._more:
            self.file_changed()

    @on(FileReplaced)
    def _file_replaced(self, event: FileReplaced) -> None:
        if event.generation == self._generation and self.path is not None:
            top, following = self.scroll_y, self.following
            self.open(self.path)
            self.following = following
            if not following:
                self.call_after_refresh(self.scroll_to, y=top, animate=False)

    def watch_following(self, following: bool) -> None:
        if following:
            self._scroll_to_end()
        self._post_status()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self.index is not None and round(new_value) != round(old_value):
            self.following = round(new_value) >= self.max_scroll_y

    def on_resize(self) -> None:
        if self.following:
            self._scroll_to_end()

    def _scroll_to_end(self) -> None:
        # Forced and repeated after the next refresh: until layout has run on a new virtual
        # size, the scrollbars (and so the allowed scroll range) are those of the old one.
        self.scroll_to(y=self.max_scroll_y, animate=False, force=True)
        self.call_after_refresh(self._settle_at_end)

    def _settle_at_end(self) -> None:
        if self.following:
            self.scroll_to(y=self.max_scroll_y, animate=False, force=True)

    # A pager moves at once: an animated scroll makes every key take a quarter of a second.
    def action_scroll_up(self) -> None:
        self.scroll_up(animate=False)

    def action_scroll_down(self) -> None:
        self.scroll_down(animate=False)

    def action_scroll_left(self) -> None:
        self.scroll_left(animate=False)

    def action_scroll_right(self) -> None:
        self.scroll_right(animate=False)

    def action_page_up(self) -> None:
        self.scroll_page_up(animate=False)

    def action_page_down(self) -> None:
        self.scroll_page_down(animate=False)

    def action_bottom(self) -> None:
        self.following = True
        self._scroll_to_end()

    def action_top(self) -> None:
        self.following = False
        self.scroll_to(y=0, animate=False)

    def action_toggle_follow(self) -> None:
        self.following = not self.following

    # -- jumping and searching ------------------------------------------------------------

    def goto_line(self, number: int) -> None:
        """Put line `number` (1-based, as the gutter shows it) at the top of the screen."""
        if self.index is None or not len(self.index):
            return
        if self._wait_for_head(lambda: self.goto_line(number), f"line {number:,}"):
            return
        line = min(max(number - 1, 0), len(self.index) - 1)
        self.following = False
        self.scroll_to(y=line, animate=False, force=True)

    def find(self, text: str, *, backward: bool = False, again: bool = False) -> None:
        """Search for `text` from the current hit (or the top line on screen), in a worker."""
        query = Query.parse(text)
        if self.index is None or self.path is None or query is None:
            return
        if self._wait_for_head(lambda: self.find(text, backward=backward, again=again), f"“{text}”"):
            return
        if again and self.hit is not None and query == self.query:
            at = self.hit.offset if backward else self.hit.offset + 1
        else:
            first = min(int(self.scroll_y), max(len(self.index) - 1, 0))
            at = self.index.span(first)[0] if len(self.index) else self.index.origin
        if query != self.query:
            self.query, self.hit = query, None
            self._strips.clear()
            self.refresh()
        self._searching = query.text
        self._post_status()
        self._search_file(self.path, self._generation, query, self.index.origin, self.index.end, at, backward)

    @work(thread=True, exclusive=True, group="spill-search")
    def _search_file(self, path: Path, generation: int, query: Query, start: int, stop: int, at: int,
                     backward: bool) -> None:
        worker = get_current_worker()
        try:
            fd = open_spill(path)
        except OSError as exc:
            self.post_message(FileFailed(generation, f"cannot search {path.name}: {exc.strerror or exc}"))
            return
        try:
            hit, wrapped = search(fd, query, start, stop, at, backward=backward,
                                  cancelled=lambda: worker.is_cancelled)
        finally:
            os.close(fd)
        if not worker.is_cancelled:
            self.post_message(SearchFinished(generation, query, hit, wrapped, backward))

    @on(SearchFinished)
    def _search_finished(self, event: SearchFinished) -> None:
        if event.generation != self._generation or self.index is None or event.query != self.query:
            return
        self._searching = None
        if event.hit is None:
            self._message = f"not found: {event.query.text}"
        else:
            previous, self.hit = self.hit, event.hit
            for hit in (previous, event.hit):
                if hit is not None:
                    self._forget_line(self.index.line_at(hit.offset))
            line = self.index.line_at(event.hit.offset)
            self._message = ("search wrapped to the " + ("end" if event.backward else "top")) if event.wrapped else ""
            self._show_line(line, self._hit_column(line))
            self.refresh()
        self._post_status()

    def _wait_for_head(self, then: Callable[[], None], what: str) -> bool:
        """Line numbers and the head's text are unknown until the head is indexed: do `then`
        once it is (a second request replaces the first)."""
        if self.index is None or self.index.has_head:
            return False
        self._pending = then
        self._message = f"{what} once indexing is done"
        self._post_status()
        return True

    def clear_search(self) -> None:
        self.query = self.hit = None
        self._searching = None
        self._strips.clear()
        self.refresh()
        self._post_status()

    def _show_line(self, line: int, column: int = 0) -> None:
        height = self.scrollable_content_region.height
        width = self.scrollable_content_region.width - self._gutter_width()
        y = self.scroll_y
        if not y <= line < y + height:
            y = max(0, line - height // 3)
        x = self.scroll_x
        if not x <= column < x + width - 1:
            x = max(0, column - width // 3)
        self.following = False
        self.scroll_to(x=x, y=y, animate=False, force=True)

    def _hit_column(self, line: int) -> int:
        if self.hit is None or self.index is None or self._fd is None:
            return 0
        start, _ = self.index.span(line)
        skip = self._skip(line, start)
        before = Text(display_text(os.pread(self._fd, self.hit.offset - start - skip, start + skip),
                                   complete=False))
        before.expand_tabs(4)
        return (1 if skip else 0) + before.cell_len

    # -- drawing --------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()

    def _gutter_width(self) -> int:
        if self.index is None:
            return 0
        return len(f"{len(self.index):,}") + 2

    def _resize_virtual(self) -> None:
        lines = len(self.index) if self.index is not None else 0
        self.virtual_size = Size(self._gutter_width() + self._widest, lines)

    def _forget_line(self, line: int) -> None:
        self._rows.discard(line)
        for key in [k for k in self._strips.keys() if k[0] == line]:
            self._strips.discard(key)

    def _skip(self, line: int, start: int) -> int:
        """Bytes of `line` left out so that the current hit, deep in a long line, is shown."""
        hit = self.hit
        if hit is None or self.index is None or self.index.line_at(hit.offset) != line:
            return 0
        into = hit.offset - start
        return max(0, into - LINE_CAP // 4) if into + hit.length > LINE_CAP else 0

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        line = scroll_y + y
        width = self.scrollable_content_region.width
        if self.index is None or self._fd is None or line >= len(self.index):
            return Strip.blank(width, self._base_style())
        gutter_width = self._gutter_width()
        number = f"{line + 1:,}" if self.index.has_head else "·"
        base = self._base_style()
        gutter = Text(number.rjust(gutter_width - 1) + " ", style=self._style("spill-view--line-number"))
        gutter_strip = Strip(list(gutter.render(self.app.console)), gutter_width).apply_style(base)
        body = self._body(line)
        return Strip.join([gutter_strip, body.crop_extend(scroll_x, scroll_x + width - gutter_width, base)])

    def _body(self, line: int) -> Strip:
        hit_here = self.hit if self.hit is not None and self.index.line_at(self.hit.offset) == line else None
        key = (line, self.query, hit_here)
        strip = self._strips.get(key)
        if strip is not None:
            return strip
        start, _ = self.index.span(line)
        skip = self._skip(line, start)
        try:
            row = read_line(self._fd, self.index, line, skip=skip) if skip else self._row(line)
        except OSError:
            row = None
        text = self._styled(row, skip, hit_here)
        segments = list(text.render(self.app.console))
        strip = Strip(segments, text.cell_len).apply_style(self._base_style())
        self._strips[key] = strip
        if text.cell_len > self._widest:
            self._widest = text.cell_len
            self.call_later(self._resize_virtual)
        return strip

    def _row(self, line: int) -> LineBytes:
        row = self._rows.get(line)
        if row is None:
            for number, row_read in enumerate(read_lines(self._fd, self.index, line, max(self.size.height, 1)), line):
                self._rows[number] = row_read
            row = self._rows[line]
        return row

    def _style(self, component: str | None) -> Style:
        """A component's style (the widget's own for None), looked up once per style change:
        the lookup walks the DOM and would otherwise cost more than reading the line."""
        style = self._styles.get(component)
        if style is None:
            style = self.rich_style if component is None else self.get_component_rich_style(component)
            self._styles[component] = style
        return style

    def _base_style(self) -> Style:
        return self._style(None)

    def _styled(self, row, skip: int, hit: Hit | None) -> Text:
        cut_style = self._style("spill-view--cut")
        if row is None:
            return Text("(unreadable)", style=cut_style)
        text = Text(display_text(row.data, complete=row.cut == 0))
        control = self._style("spill-view--control")
        for mark in _MARKS.finditer(text.plain):
            text.stylize(control, mark.start(), mark.end())
        if self.query is not None:
            match_style = self._style("spill-view--match")
            pattern = re.compile(re.escape(self.query.text), re.IGNORECASE if self.query.fold else 0)
            for match in pattern.finditer(text.plain):
                text.stylize(match_style, match.start(), match.end())
            if hit is not None and hit.offset >= row.start:
                column = len(display_text(row.data[:hit.offset - row.start], complete=False))
                text.stylize(self._style("spill-view--current-match"),
                             column, column + len(self.query.text))
        text.expand_tabs(4)
        if skip:
            text = Text.assemble(("…", cut_style), text)
        if row.cut:
            text.append(f" … {human_size(row.cut)} more", style=cut_style)
        return text

    # -- status ---------------------------------------------------------------------------

    @property
    def status(self) -> SpillStatus:
        index = self.index
        return SpillStatus(
            path=self.path,
            lines=len(index) if index is not None else 0,
            size=index.end if index is not None else 0,
            numbered=index is not None and index.has_head,
            indexed=self._indexed,
            following=self.following,
            searching=self._searching,
            message=self._message,
        )

    def _post_status(self) -> None:
        self.post_message(self.StatusChanged(self.status))
