"""The spill pane: a session's spill files, one of them tailed live, with jump and search.

A watcher worker (watchfiles, in a thread) lists the session's spill directory whenever it
changes, and at least once a second in case an event was missed; the open file's growth is
handed to the `SpillView`, which scans only what was appended.
"""

from __future__ import annotations

from pathlib import Path
from typing import Self

import watchfiles
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from breakwater.tools.spill import SPILL_DIR
from breakwater.tools.spill_index import SpillFile, human_size, list_spill_files, session_spill_dir
from breakwater.ui.spill.messages import SpillFilesListed
from breakwater.ui.spill.view import SpillStatus, SpillView

WATCH_STEP_MS = 20
"""How long the watcher waits for more changes before reporting: the follow latency floor."""
WATCH_DEBOUNCE_MS = 200
"""Longest the watcher groups a steady stream of writes before reporting them."""
RELIST_MS = 1000
NARROW = 90
"""Below this many columns the file list goes above the file instead of beside it."""


class SpillFileList(OptionList, inherit_bindings=False):
    """The spill files, newest first; Enter opens one."""

    KEYS_NAME = "spill files"

    BINDINGS = [
        Binding("up,k", "cursor_up", "Up", show=False, id="spill.files.up", tooltip="Previous spill file"),
        Binding("down,j", "cursor_down", "Down", show=False, id="spill.files.down", tooltip="Next spill file"),
        Binding("home", "first", "First", show=False, id="spill.files.first", tooltip="Newest spill file"),
        Binding("end", "last", "Last", show=False, id="spill.files.last", tooltip="Oldest spill file"),
        Binding("pageup", "page_up", "Page up", show=False, id="spill.files.page-up", tooltip="Up one page"),
        Binding("pagedown", "page_down", "Page down", show=False, id="spill.files.page-down",
                tooltip="Down one page"),
        Binding("enter", "select", "Open", id="spill.files.open", tooltip="Open this spill file at its tail"),
    ]


class SpillPane(Widget):
    """The spill files of one session's workspace (`<workspace>/.agent/spill/<session>/`).

    With `session_id=None` every session's spill files are listed; with `workspace=None`
    (not known yet) the pane says how to name one. Until the user picks a file, the newest
    one is open, so a live session's latest tool output is the one followed.
    """

    BINDINGS = [
        Binding("slash", "search", "Search", id="spill.search", tooltip="Search the open spill file"),
        Binding("n", "search_next", "Next hit", id="spill.search-next", tooltip="Go to the next search hit"),
        Binding("N", "search_previous", "Prev hit", id="spill.search-previous",
                tooltip="Go to the previous search hit"),
        Binding("colon", "goto", "Go to line", id="spill.goto", tooltip="Jump to a line number"),
        Binding("escape", "dismiss", "Close", show=False, id="spill.dismiss",
                tooltip="Close the search or line prompt; clear the search"),
    ]

    COMPONENT_CLASSES = {"spill-pane--following", "spill-pane--paused", "spill-pane--message"}

    DEFAULT_CSS = """
    SpillPane {
        layout: horizontal;
        height: 1fr;
        & > .spill-pane--following { color: $success; text-style: bold; }
        & > .spill-pane--paused { color: $warning; text-style: bold; }
        & > .spill-pane--message { color: $accent; }
        SpillFileList {
            width: 30%; max-width: 48; min-width: 16; height: 1fr;
            border: none; border-right: solid $panel;
            &:focus { border-right: solid $accent; }
        }
        &.-narrow {
            layout: vertical;
            SpillFileList {
                width: 1fr; max-width: 100%; height: auto; max-height: 6;
                border-right: none; border-bottom: solid $panel;
                &:focus { border-right: none; border-bottom: solid $accent; }
            }
        }
        #spill-main { width: 1fr; height: 1fr; }
        #spill-status { height: auto; max-height: 3; background: $panel; color: $foreground; padding: 0 1; }
        SpillView { height: 1fr; }
        #spill-input { dock: bottom; display: none; }
    }
    """

    def __init__(self, workspace: Path | None, session_id: str | None = None, *, name: str | None = None,
                 id: str | None = None, classes: str | None = None):
        super().__init__(name=name, id=id, classes=classes)
        self.workspace = Path(workspace) if workspace is not None else None
        self.session_id = session_id
        self.files: tuple[SpillFile, ...] = ()
        self._auto_open = True
        self._prompt: str | None = None
        self._last_search = ""

    def compose(self) -> ComposeResult:
        yield SpillFileList(id="spill-files")
        with Vertical(id="spill-main"):
            yield Static(id="spill-status")
            yield SpillView(id="spill-view")
            yield Input(id="spill-input")

    @property
    def view(self) -> SpillView:
        return self.query_one(SpillView)

    def focus(self, scroll_visible: bool = True) -> Self:
        """Focus the open file (the pane itself takes no focus), so a host can focus the pane."""
        self.view.focus(scroll_visible)
        return self

    def on_mount(self) -> None:
        self._show_status(self.view.status)
        if self.workspace is not None:
            self._watch(self.workspace, self.session_id)

    def on_resize(self) -> None:
        # No container queries in TCSS: a pane squeezed into a side column stacks the list on top.
        self.set_class(self.size.width < NARROW, "-narrow")

    def show_session(self, workspace: Path | None, session_id: str | None) -> None:
        """Switch to another session's spill files (the replay opened another log)."""
        self.workspace = Path(workspace) if workspace is not None else None
        self.session_id = session_id
        self.files, self._auto_open = (), True
        self.query_one(SpillFileList).clear_options()
        self.view.close()
        if self.workspace is not None:
            self._watch(self.workspace, session_id)
        else:
            self.workers.cancel_group(self, "spill-watch")

    def open(self, path: Path, *, chosen: bool = True) -> None:
        """Open `path` at its tail and follow it; `chosen`: the user picked it, so a newer
        spill file no longer takes its place."""
        self.view.open(path)
        self._auto_open = self._auto_open and not chosen
        self._fill_list()

    # -- watching the directory -----------------------------------------------------------

    def _watch_target(self, workspace: Path, session_id: str | None) -> tuple[Path, bool, bool]:
        """The deepest existing directory on the way to the spill files; whether it is the
        final one; whether to watch below it."""
        root = workspace / SPILL_DIR
        final = session_spill_dir(workspace, session_id) if session_id is not None else root
        for candidate in (final, root, root.parent, workspace):
            if candidate.is_dir():
                return candidate, candidate == final, candidate == final and session_id is None
        return workspace, False, False

    @work(thread=True, exclusive=True, group="spill-watch")
    def _watch(self, workspace: Path, session_id: str | None) -> None:
        stop = get_current_worker().cancelled_event
        changed: frozenset[Path] = frozenset()

        def listed() -> SpillFilesListed:
            return SpillFilesListed(workspace, session_id, tuple(list_spill_files(workspace, session_id)), changed)

        while not stop.is_set():
            self.post_message(listed())
            target, final, recursive = self._watch_target(workspace, session_id)
            if not target.is_dir():
                stop.wait(RELIST_MS / 1000)
                continue
            try:
                for batch in watchfiles.watch(target, watch_filter=None, debounce=WATCH_DEBOUNCE_MS,
                                              step=WATCH_STEP_MS, stop_event=stop, rust_timeout=RELIST_MS,
                                              yield_on_timeout=True, recursive=recursive,
                                              ignore_permission_denied=True):
                    changed = frozenset(Path(path) for _, path in batch)
                    if not final and self._watch_target(workspace, session_id)[0] != target:
                        break
                    self.post_message(listed())
                    changed = frozenset()
            except (OSError, RuntimeError):
                # The directory went away under the watcher; look again for where to watch.
                stop.wait(RELIST_MS / 1000)

    @on(SpillFilesListed)
    def _files_listed(self, event: SpillFilesListed) -> None:
        event.stop()
        if (event.workspace, event.session_id) != (self.workspace, self.session_id):
            return  # from the watcher of a session the pane has since left
        if event.files != self.files:
            before, self.files = self.files, event.files
            if [f.path for f in before] == [f.path for f in event.files]:
                # Only sizes changed (a file is growing): relabel those rows, keep the list as it is.
                file_list = self.query_one(SpillFileList)
                for old, new in zip(before, event.files):
                    if old != new:
                        file_list.replace_option_prompt(str(new.path), self._label(new, new.path == self.view.path))
            else:
                self._fill_list()
        view = self.view
        if self._auto_open and event.files and view.path != event.files[0].path:
            self.open(event.files[0].path, chosen=False)
            return
        if view.path is None or view.index is None:
            return
        listed = next((f for f in event.files if f.path == view.path), None)
        if view.path in event.changed or (listed is not None and listed.size != view.index.end):
            view.file_changed()

    def _fill_list(self) -> None:
        file_list = self.query_one(SpillFileList)
        highlighted = file_list.highlighted_option
        keep = highlighted.id if highlighted is not None else None
        open_path = str(self.view.path) if self.view.path is not None else None
        file_list.set_options(Option(self._label(f, str(f.path) == open_path), id=str(f.path)) for f in self.files)
        ids = [str(f.path) for f in self.files]
        target = keep if keep in ids else open_path
        if target in ids:
            file_list.highlighted = ids.index(target)

    def _label(self, spill: SpillFile, is_open: bool) -> Text:
        name = spill.name if self.session_id is not None else f"{spill.session}/{spill.name}"
        label = Text("● " if is_open else "  ", style="bold")
        label.append(name)
        label.append(f"  {human_size(spill.size)}", style="dim")
        return label

    @on(OptionList.OptionSelected, "#spill-files")
    def _file_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id is not None:
            self.open(Path(event.option.id))
            self.view.focus()

    # -- status ---------------------------------------------------------------------------

    @on(SpillView.StatusChanged)
    def _status_changed(self, event: SpillView.StatusChanged) -> None:
        self._show_status(event.status)

    def _show_status(self, status: SpillStatus) -> None:
        self.query_one("#spill-status", Static).update(self._status_text(status))

    def _status_text(self, status: SpillStatus) -> Text:
        if status.path is None:
            style = self.get_component_rich_style("spill-pane--message")
            if self.workspace is None:
                return Text("No workspace known for this session: pass --workspace DIR to see its spill files.",
                            style=style)
            if not self.workspace.is_dir():
                return Text(f"The workspace {self.workspace} is not on this machine: pass --workspace DIR to see "
                            "this session's spill files.", style=style)
            where = (session_spill_dir(self.workspace, self.session_id) if self.session_id is not None
                     else self.workspace / SPILL_DIR)
            return Text(status.message or f"No spill file open — spill files appear in {where} when a tool's "
                        "output is cut.", style=style)
        text = Text(status.path.name, style="bold")
        text.append(f"  {status.lines:,}{'' if status.numbered else '+'} lines · {human_size(status.size)}")
        if status.indexed < 1:
            text.append(f" · indexing {status.indexed:.0%}")
        if status.following:
            text.append("  ● following", style=self.get_component_rich_style("spill-pane--following"))
        else:
            text.append("  ‖ paused", style=self.get_component_rich_style("spill-pane--paused"))
        if status.searching:
            text.append(f"  searching “{status.searching}”…")
        if status.message:
            text.append(f"  {status.message}", style=self.get_component_rich_style("spill-pane--message"))
        return text

    # -- prompts: search and go to line ---------------------------------------------------

    def _ask(self, kind: str, placeholder: str, value: str = "") -> None:
        prompt = self.query_one("#spill-input", Input)
        self._prompt = kind
        prompt.placeholder = placeholder
        prompt.value = value
        # Shown by its own style and focused at once (focus() would wait for the queue), so keys
        # typed right after "/" already go to the prompt, not to the view.
        prompt.display = True
        self.app.set_focus(prompt)

    def _close_prompt(self) -> None:
        self._prompt = None
        self.query_one("#spill-input", Input).display = False
        self.view.focus()

    def action_search(self) -> None:
        self._ask("search", "Search (lower case ignores case) — Enter to find, Esc to close", self._last_search)

    def action_goto(self) -> None:
        self._ask("goto", "Go to line number — Enter to jump, Esc to close")

    def action_search_next(self) -> None:
        self._search_again(backward=False)

    def action_search_previous(self) -> None:
        self._search_again(backward=True)

    def _search_again(self, *, backward: bool) -> None:
        if not self._last_search:
            self.action_search()
            return
        self.view.find(self._last_search, backward=backward, again=True)

    def action_dismiss(self) -> None:
        if self._prompt is not None:
            self._close_prompt()
        else:
            self.view.clear_search()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "dismiss":
            # Otherwise Escape belongs to the app (leaving a screen, closing a dialog).
            return self._prompt is not None or self.view.query is not None
        return True

    @on(Input.Submitted, "#spill-input")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        kind, value = self._prompt, event.value.strip()
        self._close_prompt()
        if kind == "search" and value:
            self._last_search = value
            self.view.find(value)
        elif kind == "goto" and value:
            try:
                number = int(value.replace(",", "").replace("_", ""))
            except ValueError:
                self.notify(f"not a line number: {value}", severity="warning")
                return
            self.view.goto_line(number)
