"""The inspector: the selected message raw (as logged) and as sent at the current turn, side by
side. Replaced spans (`Edit.spans`) are highlighted on the raw side in their kind's colour; the
head lists each edit's stage, the threshold that fired and tokens before → after. A tool call is
shown with its results, a result with its call; the summary row shows what it covers."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical

from breakwater.core.log.words import grouped, plural
from breakwater.core.log.visible import visible
from breakwater.core.log.edits import Edit
from breakwater.core.log.message import Message
from breakwater.core.replay import TurnDetail
from breakwater.core.log.tokens import heuristic_message
from breakwater.ui.widgets.badges import describe, label
from breakwater.ui.widgets.drawn import Drawn
from breakwater.ui.widgets.message_list import SUMMARY_ROW, preview
from breakwater.ui.widgets.text_pane import TextPane

Spans = list[tuple[int, int, str]]
COVERED_LISTED = 400
STACK_BELOW = 76   # columns


def _call_line(call) -> str:
    return visible(f"→ {call.name}({call.arguments})")


class InspectorHead(Drawn):
    """What happened to the message; a fixed height, so a new selection never relayouts the screen."""

    WRAP = True

    def __init__(self, id: str | None = None):
        super().__init__(id=id)
        self.text: Text | str = ""

    def update(self, text: Text | str) -> None:
        self.text = text
        self.redraw()

    def draw(self) -> Text:
        return self.text if isinstance(self.text, Text) else Text(self.text)


class Inspector(Vertical):
    def __init__(self, messages: list[Message], id: str | None = None):
        super().__init__(id=id)
        self.set_messages(messages)
        self.index: int | None = None
        self.detail: TurnDetail | None = None

    def set_messages(self, messages: list[Message]) -> None:
        self.messages = messages
        self.by_call: dict[str, list[int]] = {}   # tool_call_id -> indices of its results
        self.call_of: dict[str, tuple[int, object]] = {}   # tool_call_id -> (assistant index, call)
        for i, m in enumerate(messages):
            if m.role == "tool" and m.tool_call_id:
                self.by_call.setdefault(m.tool_call_id, []).append(i)
            for c in m.tool_calls:
                self.call_of[c.id] = (i, c)
        self._index_of: dict[str, int] | None = None   # message id -> row, built when first asked
        self.index = None   # redraw on the next show()

    def compose(self) -> ComposeResult:
        yield InspectorHead(id="inspector-head")
        with Horizontal(id="inspector-panes"):
            yield TextPane(id="inspector-raw")
            yield TextPane(id="inspector-sent")

    def on_mount(self) -> None:
        self.query_one("#inspector-raw").border_title = "raw (as logged)"
        self.query_one("#inspector-sent").border_title = "sent"
        self.border_title = "Inspector"

    def on_resize(self) -> None:
        # side by side needs room; in a narrow inspector the sent text goes under the raw one
        self.set_class(self.size.width < STACK_BELOW, "-stacked")

    def show(self, index: int | None, detail: TurnDetail | None) -> None:
        if index == self.index and detail is self.detail:
            return
        self.index, self.detail = index, detail
        head = self.query_one(InspectorHead)
        raw_pane = self.query_one("#inspector-raw", TextPane)
        sent_pane = self.query_one("#inspector-sent", TextPane)
        turn = detail.view.turn if detail else None
        sent_pane.border_title = f"sent at turn {turn}" if turn else "sent"
        if index is None:
            head.update("No message selected.")
            raw_pane.set_text("")
            sent_pane.set_text("")
            return
        if index == SUMMARY_ROW:
            self._show_summary(detail, head, raw_pane, sent_pane)
            return
        m = self.messages[index]
        raw_text, raw_spans = self._text_of(m, lambda x: x, detail)
        raw_pane.set_text(raw_text, raw_spans)
        future = detail is not None and index >= detail.history
        if detail is None:
            sent_pane.set_text("(the request is being computed…)")
        elif future:
            sent_pane.set_text(f"(not in the history yet: this message comes after the request of turn {turn})")
        elif m.id in detail.sent_by_id:
            sent_text, _ = self._text_of(m, lambda x: detail.sent_by_id.get(x.id), None)
            sent_pane.set_text(sent_text)
        else:
            sent_pane.set_text(self._why_not_sent(m, detail))
        head.update(self._head(index, m, detail, future))

    # -- pieces -----------------------------------------------------------------------------------
    def _text_of(self, m: Message, version, detail: TurnDetail | None) -> tuple[str, Spans]:
        """The message (and its call or results) as one text; spans of the raw side's edits."""
        parts: list[str] = []
        spans: Spans = []
        pos = 0

        def add(text: str, msg: Message | None = None) -> None:
            nonlocal pos
            if msg is not None and detail is not None:
                for e in detail.edits_by_id.get(msg.id, ()):
                    for s, t in e.spans:
                        spans.append((pos + s, pos + min(t, len(text)), e.kind))
            parts.append(text)
            pos += len(text)

        if m.role == "tool" and m.tool_call_id in self.call_of:
            _, call = self.call_of[m.tool_call_id]
            add(f"{_call_line(call)}\n── result ──\n")
        shown = version(m)
        add(shown.content if shown is not None else "", m)
        for call in m.tool_calls:
            add(f"\n{_call_line(call)}")
            for r in self.by_call.get(call.id, ()):
                result = version(self.messages[r])
                add(f"\n── result #{r} ──\n")
                if result is None:
                    add("(not sent)")
                else:
                    add(result.content, self.messages[r])
        return "".join(parts), spans

    def _head(self, index: int, m: Message, detail: TurnDetail | None, future: bool) -> Text:
        text = Text()
        text.append(f"#{index} {m.role}", style="bold")
        if m.role == "user" and m.is_observation:   # a text-mode observation: compacted like a tool result
            text.append(" (observation)", style="bold")
        text.append(f" · id {m.id} · turn {m.turn} · raw {heuristic_message(m):,} tokens")
        if detail is not None and not future:
            text.append(f" → sent {detail.sent_tokens(m):,}")
        edits = detail.edits_by_id.get(m.id, []) if detail and not future else []
        for e in edits:
            text.append("\n")
            text.append(f" {label(e.kind)} ", style=self._kind_style(e.kind))
            text.append(f" {e.kind} · stage {e.stage}")
            if e.threshold:
                text.append(f" · {grouped(e.threshold)}")
            text.append(f" · tokens {e.tokens_before:,} → {e.tokens_after:,}")
        joined = detail.joined.get(m.id, ()) if detail and not future else ()
        if joined:
            text.append("\n")
            text.append(f" {label('merged')} ", style=self._kind_style("merged"))
            text.append(f" merged · stage shape_history · {self._joined_names(joined)} joined to this message "
                        f"so that turns alternate · tokens {heuristic_message(m):,} → {detail.sent_tokens(m):,}")
        src = (m.meta or {}).get("source") if m.meta else None
        if isinstance(src, dict) and src.get("spill_path"):
            text.append(f"\nfull output: {src['spill_path']}")
        if detail and detail.summary and detail.summary.covers(m.id):
            text.append("\ncovered by the deep-compaction summary — press enter to jump to it", style="italic")
        kinds = sorted({e.kind for e in edits if e.spans})
        if kinds:
            text.append("\nlegend: ")
            for k in kinds:
                text.append(f" {k} ", style=self._kind_style(k))
                text.append(f" {describe(k)}  ")
        return text

    def _joined_names(self, ids: tuple[str, ...]) -> str:
        # what is not a message of the log is the summary, the only message the pipeline adds
        index_of = self.index_of()
        return ", ".join(f"#{index_of[mid]} {self.messages[index_of[mid]].role}" if mid in index_of
                         else "the deep-compaction summary" for mid in ids)

    def index_of(self) -> dict[str, int]:
        if self._index_of is None:
            self._index_of = {m.id: i for i, m in enumerate(self.messages)}
        return self._index_of

    def _kind_style(self, kind: str):
        return self.query_one("#inspector-raw", TextPane).get_component_rich_style(f"text-pane--{kind}",
                                                                                      partial=True)

    def _why_not_sent(self, m: Message, detail: TurnDetail) -> str:
        kinds = detail.kinds(m.id)
        edits: list[Edit] = detail.edits_by_id.get(m.id, [])
        reasons = "; ".join(f"{e.kind} ({e.stage}: {grouped(e.threshold)})" if e.threshold else f"{e.kind} ({e.stage})"
                            for e in edits)
        if "summarized" in kinds:
            return f"(not sent at turn {detail.view.turn}: replaced by the deep-compaction summary)\n{reasons}"
        return f"(not sent at turn {detail.view.turn}: {reasons or 'not part of this request'})"

    def _show_summary(self, detail: TurnDetail | None, head: InspectorHead, raw_pane: TextPane,
                      sent_pane: TextPane) -> None:
        s = detail.summary if detail else None
        if s is None:
            head.update("No summary in this request.")
            raw_pane.set_text("")
            sent_pane.set_text("")
            return
        index_of = self.index_of()
        lines = [f"#{index_of[mid]} {self.messages[index_of[mid]].role:<9} {preview(self.messages[index_of[mid]])[:160]}"
                 for mid in s.covered[:COVERED_LISTED] if mid in index_of]
        if len(s.covered) > COVERED_LISTED:
            lines.append(f"… and {len(s.covered) - COVERED_LISTED:,} more (the rows under the summary in the list)")
        raw_pane.set_text(f"covers {plural(len(s.covered), 'message')} (enter jumps to the first):\n"
                          + "\n".join(lines))
        sent_pane.set_text(s.message.content)
        text = Text()
        text.append("deep-compaction summary", style="bold")
        c = s.compaction
        if c is not None:
            text.append(f" · {c.id} · made at turn {c.turn} · trigger {c.trigger} · summarizer {c.summarizer}")
            text.append(f"\ntokens {c.tokens_before:,} → {c.tokens_after:,} · covers {plural(len(s.covered), 'message')}")
        text.append(f"\n{heuristic_message(s.message):,} tokens sent in their place")
        head.update(text)
