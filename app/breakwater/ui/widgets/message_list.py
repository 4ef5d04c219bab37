"""The message list: one row per log message, drawn with the line API (`render_line` + an LRU of
strips), so 20,000 messages cost what the visible rows cost — never a widget per message.

A row: index, turn, role, tokens raw → sent, a badge per edit kind (and pin), a preview. The
request's deep-compaction summary gets a row of its own just above the first message it covers,
and the covered messages are drawn under it with a gutter mark. Messages after the current
request (not yet in its history) are dimmed.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message as TMessage
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from breakwater.core.log.words import plural
from breakwater.core.log.visible import visible
from breakwater.core.log.message import Message
from breakwater.core.replay import TurnDetail
from breakwater.core.log.tokens import heuristic_message
from breakwater.ui.widgets.badges import ALL_KINDS, ROLES, label

SUMMARY_ROW = -1
PREVIEW_CHARS = 400
BADGES_SHOWN = 2
BADGE_COLUMN = 12
ROLE_SHORT = {"system": "sys", "user": "user", "assistant": "asst", "tool": "tool"}


def preview(msg: Message) -> str:
    """One line that says what a message is."""
    text = msg.content[:PREVIEW_CHARS]
    thought = msg.meta.get("thinking") if msg.meta and not text.strip() else None
    if isinstance(thought, str) and thought.strip():
        # a reply that has only thought so far (Claude Code writes the thinking block on a line of its
        # own, before the text and the calls): an empty row read as nothing arrived
        text = f"thinking: {thought[:PREVIEW_CHARS]}"
    if msg.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments[:80]})" for c in msg.tool_calls)
        text = f"{text} → {calls}" if text.strip() else f"→ {calls}"
    return visible(" ".join(text.split()))


@dataclass(frozen=True)
class ListFilter:
    role: str | None = None       # one role, or all
    kind: str | None = None       # "any" (edited at all), one kind, or all
    search: str = ""

    def describe(self) -> str:
        parts = []
        if self.role:
            parts.append(f"role={self.role}")
        if self.kind:
            parts.append("edited" if self.kind == "any" else f"kind={self.kind}")
        if self.search:
            parts.append(f"search={self.search!r}")
        return " · ".join(parts)


class MessageList(ScrollView, can_focus=True, inherit_bindings=False):
    """Rows are indices into `messages`, or SUMMARY_ROW for the summary of the current request."""

    COMPONENT_CLASSES = {
        "message-list--cursor", "message-list--index", "message-list--tokens", "message-list--future",
        "message-list--covered", "message-list--match", "message-list--differs",
        *(f"message-list--role-{r}" for r in (*ROLES, "summary")),
        *(f"message-list--{k}" for k in (*ALL_KINDS, "pinned")),
    }
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False, id="list.up", tooltip="Select the previous message"),
        Binding("down,j", "cursor(1)", "Down", show=False, id="list.down", tooltip="Select the next message"),
        Binding("pageup", "page(-1)", "Page up", show=False, id="list.page_up", tooltip="One screen up"),
        Binding("pagedown", "page(1)", "Page down", show=False, id="list.page_down", tooltip="One screen down"),
        Binding("ctrl+home", "cursor_to(0)", "First row", show=False, id="list.top", tooltip="First message"),
        Binding("ctrl+end", "cursor_to(-1)", "Last row", show=False, id="list.bottom", tooltip="Last message"),
        Binding("enter", "open", "Open / jump", show=False, id="list.open",
                tooltip="Summary: jump to what it covers; covered message: jump to its summary"),
    ]

    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)

    @dataclass
    class Selected(TMessage):
        """The cursor moved: `index` into the log's messages, or SUMMARY_ROW."""

        index: int

    def __init__(self, messages: list[Message], pins: set[str], id: str | None = None):
        super().__init__(id=id)
        self.messages = messages
        self.pins = pins
        self.detail: TurnDetail | None = None
        self.marks: set[str] = set()   # ids marked ≠ (the A/B view: edited differently under B)
        self.filter = ListFilter()
        self.rows: list[int] = list(range(len(messages)))
        self._raw_tokens: dict[int, int] = {}
        self._strips: LRUCache[tuple, Strip] = LRUCache(2048)
        self._lower: list[str] | None = None
        self._styles: dict[str, Style] = {}
        self.virtual_size = Size(0, len(self.rows))

    # -- data -------------------------------------------------------------------------------------
    def set_messages(self, messages: list[Message], pins: set[str]) -> None:
        """The log changed (it grew, or pins changed): same selection where it still exists."""
        keep = self.selected_index
        self.messages, self.pins = messages, pins
        self._raw_tokens.clear()
        self._lower = None
        self._strips.clear()
        self._rebuild(keep)

    def set_detail(self, detail: TurnDetail | None) -> None:
        """Another turn: rows are drawn again only where what they show changed (their strips are
        cached by it), and only those are repainted, so a step costs the few messages it touched."""
        keep = self.selected_index
        top = self.scroll_offset.y
        shown = [(index, self._state(index)) for index in self.rows[top:top + self.size.height]]
        self.detail = detail
        self._rebuild(keep, (top, shown))

    def set_marks(self, ids: set[str]) -> None:
        self.marks = set(ids)
        self._strips.clear()
        self.refresh()

    def set_filter(self, flt: ListFilter) -> None:
        keep = self.selected_index
        self.filter = flt
        self._strips.clear()
        self._rebuild(keep)
        self.border_subtitle = flt.describe() or None

    def _rebuild(self, keep: int | None, shown: tuple[int, list] | None = None) -> None:
        """`shown`: the top row and what the rows on screen showed, when only they may have changed."""
        detail, flt = self.detail, self.filter
        covered = self._covered
        needle = flt.search.lower()
        summary_placed = not (detail and detail.summary and detail.summary.covered) \
            or not self._summary_passes(flt, needle)
        if flt == ListFilter():     # the common case, in C speed: every message, the summary above its first
            rows = list(range(len(self.messages)))
            if not summary_placed:
                first = next(i for i, m in enumerate(self.messages) if covered(m.id))
                rows.insert(first, SUMMARY_ROW)
            self._set_rows(rows, keep, shown)
            return
        rows: list[int] = []
        if needle and self._lower is None:
            self._lower = [m.content.lower() for m in self.messages]
        for i, m in enumerate(self.messages):
            if not summary_placed and covered(m.id):
                rows.append(SUMMARY_ROW)
                summary_placed = True
            if flt.role and m.role != flt.role:
                continue
            if flt.kind:
                kinds = detail.kinds(m.id) if detail else []
                if m.id in self.pins:
                    kinds.append("pinned")
                if not kinds if flt.kind == "any" else flt.kind not in kinds:
                    continue
            if needle and needle not in self._lower[i] and not any(
                    needle in c.name.lower() or needle in c.arguments.lower() for c in m.tool_calls):
                continue
            rows.append(i)
        if not summary_placed:
            rows.insert(0, SUMMARY_ROW)
        self._set_rows(rows, keep, shown)

    def _set_rows(self, rows: list[int], keep: int | None, shown: tuple[int, list] | None = None) -> None:
        same = shown is not None and rows == self.rows
        self.rows = rows
        self.virtual_size = Size(self.size.width, len(rows))
        self.select_index(keep if keep is not None else 0, scroll=False)
        if not same or self.scroll_offset.y != shown[0]:
            self.refresh()
            return
        top, before = shown
        for y, (index, state) in enumerate(before):
            if self._state(index) != state:
                self.refresh_row(top + y)

    def _summary_passes(self, flt: ListFilter, needle: str) -> bool:
        summary = self.detail.summary
        return (flt.role in (None, "user") and flt.kind in (None, "any", "summarized")
                and (not needle or needle in summary.message.content.lower()))

    def kinds_present(self) -> list[str]:
        """The edit kinds (and pins) that occur at the current request, for the kind filter."""
        detail = self.detail
        got = detail.view.edit_counts() if detail else {}
        out = [k for k in ALL_KINDS if k in got]
        return out + (["pinned"] if self.pins else [])

    @property
    def selected_index(self) -> int | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def select_index(self, index: int, scroll: bool = True) -> bool:
        """Put the cursor on a log message (or the summary row); False if it is filtered out."""
        try:
            row = self.rows.index(index)
        except ValueError:
            if not self.rows:
                return False
            row = min(bisect.bisect_left(self.rows, index), len(self.rows) - 1)
            self.cursor = row
            return False
        self.cursor = row
        if scroll:
            self.scroll_to_row(row)
        return True

    def show_turn(self, turn: int) -> bool:
        """Select the first message request `turn` brings (those whose history first held it at
        that turn) and scroll its messages into view, the first one at least; False if none shows."""
        rows = [r for r, i in enumerate(self.rows) if i != SUMMARY_ROW and self.messages[i].turn == turn]
        if not rows:
            return False
        self.cursor = rows[0]
        self.scroll_to_row(rows[-1])
        self.scroll_to_row(rows[0])
        return True

    def select_id(self, message_id: str) -> bool:
        for i, m in enumerate(self.messages):
            if m.id == message_id:
                return self.select_index(i)
        return False

    # -- keys -------------------------------------------------------------------------------------
    def watch_cursor(self, old: int, new: int) -> None:
        self.refresh_row(old)
        self.refresh_row(new)
        self.scroll_to_row(new)
        index = self.selected_index
        if index is not None:
            self.post_message(self.Selected(index))

    def validate_cursor(self, value: int) -> int:
        return max(0, min(value, len(self.rows) - 1)) if self.rows else 0

    def action_cursor(self, delta: int) -> None:
        self.cursor += delta

    def action_page(self, direction: int) -> None:
        self.cursor += direction * max(1, self.scrollable_content_region.height - 1)

    def action_cursor_to(self, row: int) -> None:
        self.cursor = row if row >= 0 else len(self.rows) - 1

    def action_open(self) -> None:
        index = self.selected_index
        detail = self.detail
        if detail is None or detail.summary is None or index is None:
            return
        if index == SUMMARY_ROW and detail.summary.covered:
            self.select_id(detail.summary.covered[0])
        elif index >= 0 and detail.summary.covers(self.messages[index].id):
            self.select_index(SUMMARY_ROW)

    def on_click(self, event: events.Click) -> None:
        row = self.scroll_offset.y + event.y
        if 0 <= row < len(self.rows):
            self.cursor = row

    def scroll_to_row(self, row: int) -> None:
        height = self.scrollable_content_region.height
        top = self.scroll_offset.y
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif height and row >= top + height:
            self.scroll_to(y=row - height + 1, animate=False, immediate=True)

    def refresh_row(self, row: int) -> None:
        if 0 <= row - self.scroll_offset.y < self.size.height:
            self.refresh_lines(row)   # in the list's coordinates: it takes the scroll off itself

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._styles.clear()

    # -- drawing ----------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        row = self.scroll_offset.y + y
        width = self.scrollable_content_region.width
        if row >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        index = self.rows[row]
        selected = row == self.cursor
        key = (index, width, selected, self.has_focus, self._state(index))
        strip = self._strips.get(key)
        if strip is None:
            strip = self._render_row(index, width, selected)
            self._strips[key] = strip
        return strip.crop(self.scroll_offset.x, self.scroll_offset.x + width)

    def _state(self, index: int) -> tuple:
        """What a row shows of the current turn."""
        d = self.detail
        if d is None:
            return ()
        if index == SUMMARY_ROW:
            return (id(d.summary.message) if d.summary else None, len(d.summary.covered) if d.summary else 0)
        m = self.messages[index]
        if index >= d.history:
            return (False, m.id in self.marks)
        sent = d.sent_tokens(m) if m.id in d.sent_by_id else None
        return (True, sent, tuple(e.kind for e in d.edits_by_id.get(m.id, ())), self._covered(m.id),
                m.id in self.marks)

    def _covered(self, message_id: str) -> bool:
        """Whether the current request's summary stands for this message."""
        summary = self.detail.summary if self.detail else None
        return summary is not None and summary.covers(message_id)

    def _style(self, name: str) -> Style:
        # a CSS look-up each time costs more than the rest of a row: kept per theme (see notify_style_update)
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(f"message-list--{name}", partial=True)
        return style

    def _raw(self, index: int) -> int:
        t = self._raw_tokens.get(index)
        if t is None:
            t = self._raw_tokens[index] = heuristic_message(self.messages[index])
        return t

    def _badges(self, text: Text, kinds: list[str]) -> None:
        """A fixed-width column, so previews line up: two badges, then +N for the rest."""
        start = text.cell_len
        for n, kind in enumerate(kinds):
            if n == BADGES_SHOWN and len(kinds) > BADGES_SHOWN:
                text.append(f"+{len(kinds) - n}", self._style("tokens"))
                break
            text.append(f"{'pin' if kind == 'pinned' else label(kind):^5}", self._style(kind))
            text.append(" ")
        text.append(" " * max(1, BADGE_COLUMN - (text.cell_len - start)))

    def _render_row(self, index: int, width: int, selected: bool) -> Strip:
        detail = self.detail
        text = Text(no_wrap=True, overflow="crop", end="")
        if index == SUMMARY_ROW:
            s = detail.summary if detail else None
            n = len(s.covered) if s else 0
            text.append("    ▾ ", self._style("role-summary"))
            text.append("summary ", self._style("role-summary") + Style(bold=True))
            tokens = heuristic_message(s.message) if s else 0
            text.append(f"{'':>6}→{tokens:<6,} ", self._style("tokens"))
            text.append(f" covers {plural(n, 'message')} ", self._style("summarized"))
            text.append(" ")
            body = visible(" ".join(s.message.content.split()[3:60])) if s else ""
            text.append(" " + body)
        else:
            m = self.messages[index]
            future = detail is not None and index >= detail.history
            covered = self._covered(m.id)
            text.append(f"{index:>5}", self._style("index"))
            if m.id in self.marks:
                text.append("≠", self._style("differs"))
            else:
                text.append(" ")
            text.append("│" if covered else " ", self._style("role-summary") if covered else Style())
            text.append(f"{m.turn:>4} ", self._style("index"))
            text.append(f"{ROLE_SHORT.get(m.role, m.role[:4]):<5}", self._style(f"role-{m.role}") if m.role in ROLES
                        else Style())
            raw = self._raw(index)
            if detail is None or future:
                sent = "" if detail else "…"
            else:
                sent = f"{detail.sent_tokens(m):,}" if m.id in detail.sent_by_id else "–"
            text.append(f"{raw:>6,}→{sent:<6} ", self._style("tokens"))
            kinds = detail.kinds(m.id) if detail and not future else []
            if m.id in self.pins:
                kinds.insert(0, "pinned")
            self._badges(text, kinds)
            text.append(preview(m))
            if future:
                text.stylize(self._style("future"))
        if selected:
            text.stylize(self._style("cursor"))
        base = self.rich_style + (self._style("cursor") if selected else Style())
        strip = Strip(list(text.render(self.app.console))).apply_style(base)
        return strip.adjust_cell_length(width, base)
