"""The Breakwater workbench app and its one factory, used by the CLI, the tests and the benchmarks.

    app = make_app(log, policy, turn=12)      # a SessionLog already read (read_session)
    app.run()

Parts 2 and 3 add screens (or panes on the replay screen) and reach the session through
`app.replay` (core `Replay`: log, policy, simulation, view of any turn).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingsMap
from textual.screen import Screen

from breakwater.core.log.words import plural
from breakwater.core.overlay import OverlayFile, state_dir
from breakwater.core.policy import Policy
from breakwater.core.replay import Replay
from breakwater.core.log.session_log import SessionLog
from breakwater.ui.config import UISettings
from breakwater.ui.screens.help import HelpScreen
from breakwater.ui.screens.replay import ReplayScreen
from breakwater.ui.themes import DEFAULT_THEME, load_themes

DARK, LIGHT = "breakwater-dark", "breakwater-light"
MAX_ISSUES_SHOWN = 12


class BreakwaterApp(App):
    CSS_PATH = "breakwater.tcss"
    TITLE = "Breakwater"
    BINDINGS = [
        Binding("f1,question_mark", "help", "Help", id="app.help", tooltip="Keys and what each colour means"),
        Binding("t", "toggle_theme", "Theme", id="app.theme", tooltip="Switch between the dark and the light theme"),
        Binding("q", "quit", "Quit", id="app.quit", tooltip="Leave Breakwater"),
        Binding("o", "sessions", "Sessions", id="app.sessions",
                tooltip="Back to the list of sessions this one was opened from"),
    ]

    def __init__(self, replay: Replay | None, turn: int | None = None, workspace: Path | None = None,
                 settings: UISettings | None = None, compare: Policy | None = None,
                 overlay: OverlayFile | None = None, follower=None, sessions=None):
        super().__init__()
        self.sessions = sessions   # formats.sessions.FoundSession list: browse them first (replay is None)
        self.follower = follower   # formats.follow.Follower: the transcript is still being written
        self.replay = replay
        self.compare = compare
        self.overlay = overlay
        self.start_turn = turn
        self.workspace = workspace
        self.settings = settings or UISettings()
        for theme in load_themes():
            self.register_theme(theme)
        self.theme = self.settings.theme if self.settings.theme in self.available_themes else DEFAULT_THEME
        if self.settings.keymap:
            self.set_keymap(dict(self.settings.keymap))

    def on_mount(self) -> None:
        if self.replay is None:
            from breakwater.ui.screens.browse import BrowseScreen

            self.push_screen(BrowseScreen(self.sessions or []))
            return
        self._push_workbench()
        if self.compare is not None:
            from breakwater.ui.screens.compare import CompareScreen

            self.push_screen(CompareScreen(self.replay, self.compare, self.start_turn))
        self._report_issues()

    def open_session(self, log: SessionLog, policy: Policy, window_source: str = "policy", follower=None,
                     turn: int | None = None) -> None:
        """The workbench on a session chosen in the browser, with its overlay, as `replay` opens it
        (followed, with no overlay, when `follower` is given), at `turn` (a search's first hit) or the last."""
        self.start_turn = turn
        from breakwater.core.overlay import overlay_path

        overlay = OverlayFile(overlay_path(log.path)) if log.path is not None and follower is None else None
        self.replay = replay_of(log, policy, overlay=overlay, window_source=window_source)
        self.overlay, self.follower = overlay, follower
        self.workspace = workspace_of(log, None)
        self._push_workbench()
        self._report_issues()

    def _push_workbench(self) -> None:
        if self.follower is not None:
            from breakwater.ui.screens.follow import FollowScreen

            self.push_screen(FollowScreen(self.replay, self.follower, turn=self.start_turn, workspace=self.workspace,
                                          play_interval=self.settings.play_interval))
        else:
            self.push_screen(ReplayScreen(self.replay, self.start_turn, self.workspace, self.settings.play_interval,
                                          overlay=self.overlay))

    def _report_issues(self) -> None:
        issues = [*self.replay.log.issues, *(self.overlay.issues if self.overlay else ())]
        if not issues:
            return
        # line 0 is the file as a whole (it holds several sessions, say): no line to name
        lines = [f"line {i.line:,}: {i.reason}" if i.line else i.reason for i in issues[:MAX_ISSUES_SHOWN]]
        if len(issues) > MAX_ISSUES_SHOWN:
            lines.append(f"… and {len(issues) - MAX_ISSUES_SHOWN:,} more")
        bad = sum(1 for i in issues if i.line)
        title = f"{plural(bad, 'line')} skipped or repaired; the rest loaded" if bad else "About this file"
        self.notify("\n".join(lines), title=title, severity="warning", timeout=20)

    # -- actions ----------------------------------------------------------------------------------
    def deliver_screenshot(self, filename: str | None = None, path: str | None = None,
                           time_format: str | None = None) -> str | None:
        """The palette's Screenshot: saved under the state directory (Textual's default, ~/Downloads,
        may not exist: it then said only "Failed to save screenshot"), else the current one; the
        notification says where, or why not."""
        tried: list[str] = []
        for folder in ([Path(path)] if path else [state_dir() / "screenshots", Path.cwd()]):
            try:
                folder.mkdir(parents=True, exist_ok=True)
                saved = self.save_screenshot(filename, str(folder), time_format)
            except OSError as exc:
                tried.append(f"{folder}: {exc.strerror or exc}")
                continue
            self.notify(f"Saved to {saved}", title="Screenshot", timeout=10)
            return None
        self.notify("Could not save it — " + "; ".join(tried), title="Screenshot", severity="error", timeout=15)
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "sessions":   # only a session opened from the browser has a list to go back to
            from breakwater.ui.screens.browse import BrowseScreen

            return self.sessions is not None and not isinstance(self.screen, BrowseScreen)
        return True

    def action_sessions(self) -> None:
        """Back to the browser: the workbench and whatever it opened on top are closed (a followed
        session stops being watched with its screen)."""
        from breakwater.ui.screens.browse import BrowseScreen

        while len(self.screen_stack) > 1 and not isinstance(self.screen, BrowseScreen):
            self.pop_screen()

    def action_toggle_theme(self) -> None:
        self.theme = LIGHT if self.theme == DARK else DARK

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.binding_table()))

    def binding_table(self) -> list[tuple[str, str, str, str]]:
        """(id, keys, description, tooltip) of every binding with an id, as currently mapped."""
        seen: dict[str, tuple[str, str, str, str]] = {}
        for node in (self, *self.screen_stack, *self.screen.query("*")):
            for _, b in self._mapped(node):
                if not b.id:
                    continue
                prev = seen.get(b.id)
                keys = self.get_key_display(b)
                if prev and keys not in prev[1].split(", "):
                    keys = f"{prev[1]}, {keys}"
                seen[b.id] = (b.id, keys, b.description, b.tooltip)
        return sorted(seen.values())

    def _mapped(self, node) -> BindingsMap:
        """A node's bindings with the user's keymap applied (Textual applies it on the fly)."""
        bindings = node._bindings.copy()
        if self._keymap:
            bindings.apply_keymap(self._keymap)
        return bindings

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        done: set[str] = set()
        for node in (screen, *screen.query("*"), self):
            for _, b in self._mapped(node):
                if not b.id or b.id in done or not b.description:
                    continue
                done.add(b.id)
                yield SystemCommand(f"{b.description} ({self.get_key_display(b)})", b.tooltip or b.description,
                                    _runner(node, b.action))
        if hasattr(screen, "undo_commands"):
            for title, help, target in screen.undo_commands():
                yield SystemCommand(title, help, _runner(screen, f"undo({target!r})"))
        for commands in ("overlay_commands", "export_commands"):
            if hasattr(screen, commands):
                for title, help, action in getattr(screen, commands)():
                    yield SystemCommand(title, help, _runner(screen, action))


def _runner(node, action: str):
    async def run() -> None:
        await node.run_action(action)
    return run


def make_app(log: SessionLog, policy: Policy, *, turn: int | None = None, counter: str = "exact",
             model: str | None = None, workspace: Path | None = None,
             settings: UISettings | None = None, compare: Policy | None = None,
             overlay: OverlayFile | None = None, follower=None, window_source: str = "policy") -> BreakwaterApp:
    """The workbench on `log` under `policy`, at `turn` (default: the last recorded request);
    `compare` opens the A/B view beside a second policy; `overlay` holds the user's pins, triggers
    and undos on this recording (merged on top); `follower` (formats.follow) follows a transcript still
    being written."""
    replay = replay_of(log, policy, counter, model, overlay, window_source)
    return BreakwaterApp(replay, turn=turn, workspace=workspace_of(log, workspace), settings=settings, compare=compare,
                         overlay=overlay, follower=follower)


def replay_of(log: SessionLog, policy: Policy, counter: str = "exact", model: str | None = None,
              overlay: OverlayFile | None = None, window_source: str = "policy") -> Replay:
    return Replay(overlay.apply(log) if overlay else log, policy, counter, model, recording=log,
                  window_source=window_source)


def workspace_of(log: SessionLog, workspace: Path | None) -> Path | None:
    if workspace is None and isinstance(log.header.get("workspace"), str):
        return Path(log.header["workspace"])
    return workspace


def browse_app(sessions, settings: UISettings | None = None) -> BreakwaterApp:
    """The workbench opening on a list of the user's sessions (formats.sessions.find_sessions)."""
    return BreakwaterApp(None, settings=settings, sessions=sessions)
