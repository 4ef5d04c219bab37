"""Export… from the palette (issue 42): the replay on screen — its policy as tuned, the overlay's
edits, the turn, B when A/B is open — written as an HTML page or as Markdown by `breakwater export`'s
own code. The work runs in a worker; the dialog says what it writes and then where it wrote it."""

from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from breakwater.core.log.visible import visible
from breakwater.core.policy import Policy
from breakwater.core.replay import Replay
from breakwater.export.output import kind_of, unwritable

COMMAND = ("Export… this replay as an HTML page or Markdown",
           "Write what is on screen (policy, overlay, turn; A/B when open) as one self-contained .html or a .md")


def default_path(replay: Replay, turn: int, cwd: Path | None = None) -> Path:
    source = replay.recording.path if replay.recording is not None and replay.recording.path else replay.log.path
    stem = source.stem if source is not None else replay.log.id
    return (cwd or Path.cwd()) / f"{stem}-turn{turn}.html"


class ExportScreen(ModalScreen[str | None]):
    """Asks where; writes there; dismisses with what it wrote (None when cancelled)."""

    DEFAULT_CSS = """
    ExportScreen { align: center middle; background: $background 60%; }
    ExportScreen #export-status { height: auto; padding: 1 0 0 0; color: $muted; }
    ExportScreen #export-status.-error { color: $error; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export.cancel", tooltip="Close without writing")]

    def __init__(self, replay: Replay, turn: int, other: Policy | None = None, cwd: Path | None = None):
        super().__init__()
        self.replay = replay
        self.turn = turn
        self.other = other
        self.cwd = cwd or Path.cwd()
        self.busy = False

    def compose(self) -> ComposeResult:
        p = self.replay.policy
        beside = f", beside B = {self.other.preset} (window {self.other.window:,})" if self.other else ""
        edits = len(self.replay.log.entries) != len(self.replay.recording.entries) \
            if self.replay.recording is not None else False
        what = (f"Turn {self.turn} under {p.preset} (window {p.window:,}, counter {self.replay.counter_in_effect})"
                f"{beside}{', with your overlay edits' if edits else ''}.")
        with Vertical(id="dialog", classes="dialog"):
            yield Static(visible(what), id="dialog-what")
            yield Input(str(default_path(self.replay, self.turn, self.cwd)), id="export-path")
            yield Static("enter writes it: .html (one self-contained page) or .md (for a pull request); esc cancels",
                         id="export-status")

    def on_mount(self) -> None:
        self.query_one("#dialog").border_title = "Export this replay"
        self.query_one(Input).focus()

    def action_cancel(self) -> None:
        if not self.busy:
            self.dismiss(None)

    def say(self, text: str, error: bool = False) -> None:
        status = self.query_one("#export-status", Static)
        status.update(visible(text))
        status.set_class(error, "-error")

    @on(Input.Submitted, "#export-path")
    def submitted(self, event: Input.Submitted) -> None:
        if self.busy:
            return
        path = Path(event.value.strip()).expanduser()
        if not path.is_absolute():
            path = self.cwd / path
        kind = kind_of(path)
        reason = unwritable(path) if kind else "name a file ending in .html or .md"
        if reason:
            self.say(f"{path.name}: {reason}", error=True)
            return
        self.busy = True
        self.say(f"writing {path} …")
        self.write(path, kind)

    @work(thread=True, exclusive=True, group="export")
    def write(self, path: Path, kind: str) -> None:
        from breakwater.export import html, markdown, report
        from breakwater.export.output import write_atomically

        r = self.replay
        try:
            built = report.build(r.log, r.policy, r.counter, r.model, self.turn, r.window_source, self.other)
            text = html.render(built) if kind == "html" else markdown.render(built)
            write_atomically(path, text)
        except OSError as exc:
            self.app.call_from_thread(self._failed, f"{path}: cannot write there ({exc.strerror or exc})")
            return
        self.app.call_from_thread(self.dismiss, f"Wrote {path} ({len(text.encode()) / 1e6:.2f} MB)")

    def _failed(self, text: str) -> None:
        self.busy = False
        self.say(text, error=True)
