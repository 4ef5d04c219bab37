"""The overlay of a recording, on screen: what the user's own edits are, where they are kept, and
taking them back (one, or all). Reading the file and its format is core/overlay.py's."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from breakwater.core.log.message import Message
from breakwater.core.overlay import OverlayFile
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.log.words import plural

ALL = "\0all"   # the answer that clears every edit


def turn_at(log: SessionLog, at: int) -> int:
    """The request an event placed after `at` entries of `log` first shapes."""
    return 1 + sum(1 for e in log.entries[:at] if isinstance(e, Message) and e.role == "assistant")


def describe(ev: Event, log: SessionLog) -> str:
    """One overlay event in words, with the turn it takes effect at."""
    what = {"pin": f"pin of {ev.get('message_id')}", "unpin": f"unpin of {ev.get('message_id')}",
            "trigger": f"{ev.get('stage')} triggered by hand", "undo": f"undo of {ev.get('target')}",
            "compaction": "deep compaction by hand" + (" (edited summary)" if ev.get("reviewed") == "edited"
                                                       else "")}.get(ev.type, ev.type)
    return f"{what} from turn {turn_at(log, int(ev.get('at') or 0)):,} ({ev.id})"


def edits_note(overlay: OverlayFile | None) -> str:
    """The title bar's word on the overlay: the edits in effect (an undo is no edit, nor is what it
    took back); empty when none is."""
    from breakwater.ui.screens.controls import undoable

    if overlay is None or not overlay.events:
        return ""
    n = len(undoable(list(overlay.events)))
    return f"✎ {plural(n, 'edit')} applied" if n else ""


class OverlayScreen(ModalScreen[str | None]):
    """The edits in the overlay; enter clears the highlighted one, `a` all of them."""

    BINDINGS = [Binding("escape", "close", "Close", id="overlay.close", tooltip="Back to the replay"),
                Binding("a", "clear_all", "Clear all", id="overlay.clear_all",
                        tooltip="Take back every edit in the overlay")]
    DEFAULT_CSS = """
    OverlayScreen { align: center middle; background: $background 60%; }
    OverlayScreen #overlay-dialog { height: 80%; }
    OverlayScreen #overlay-what { padding: 1 0 0 0; height: auto; }
    OverlayScreen #overlay-list { height: 1fr; border: round $panel-lighten-2; }
    """

    def __init__(self, overlay: OverlayFile, recording: SessionLog):
        super().__init__()
        self.overlay, self.recording = overlay, recording

    def compose(self) -> ComposeResult:
        with Vertical(id="overlay-dialog", classes="dialog"):
            yield Static(self._what(), id="overlay-what")
            options = [Option(describe(ev, self.recording), id=ev.id) for ev in self.overlay.events]
            yield OptionList(*(options or [Option(Text("no edits: the recording is shown as it was recorded",
                                                       style="dim"), disabled=True)]), id="overlay-list")

    def on_mount(self) -> None:
        self.query_one("#overlay-dialog").border_title = \
            f"Overlay — {plural(len(self.overlay.events), 'edit')} applied on top of the recording"
        self.query_one(OptionList).focus()

    def _what(self) -> Text:
        return Text.assemble(("kept in ", "dim"), (str(self.overlay.path), "bold"),
                             ("\n(the recording itself is never changed)", "dim"),
                             ("\nenter: clear the edit · a: clear all · esc: close", "dim"))

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_clear_all(self) -> None:
        self.dismiss(ALL if self.overlay.events else None)

    def action_close(self) -> None:
        self.dismiss(None)
