"""`breakwater browse` (and `breakwater` alone when sessions are found): the sessions the user's
agents left (formats/sessions.py), grouped by project, newest first; enter opens one in the replay
workbench."""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, OptionList, Static
from textual.widgets.option_list import Option

from breakwater.core.policy.for_session import resolve_policy
from breakwater.core.log.json_lines import SessionLogError
from breakwater.core.log.words import plural
from breakwater.core.policy import PolicyError
from breakwater.formats import load_session
from breakwater.formats.follow import Follower
from breakwater.formats.sessions import FoundSession, by_project


def age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit} ago"
    return "just now"


def size_text(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


def row(s: FoundSession, now: float) -> Text:
    text = Text("  ")
    text.append(f"{age(now - s.modified):>11}  ", style="dim")
    text.append(f"{size_text(s.size):>8}  ")
    text.append(f"{(s.model or '?')[:28]:<28}  ", style="bold")
    text.append(f"{'last request ' + format(s.last_tokens, ',') if s.last_tokens else 'no usage recorded':<26}  ",
                style="dim" if not s.last_tokens else "")
    text.append(f"{s.agent:<11}  ", style="italic")
    text.append(s.path.name, style="dim")
    return text


class BrowseScreen(Screen):
    DEFAULT_CSS = """
    BrowseScreen #browse-title { height: 1; padding: 0 1; background: $surface; }
    BrowseScreen OptionList { height: 1fr; }
    """
    BINDINGS = [Binding("enter", "open", "Open", id="browse.open", tooltip="Open the session in the workbench"),
                Binding("F", "open(True)", "Follow", id="browse.follow",
                        tooltip="Open the session and follow it while its agent writes it")]

    def __init__(self, sessions: list[FoundSession]):
        super().__init__()
        self.sessions = sessions
        self.opened_at: float | None = None   # when enter was pressed (the bench reads it)

    def compose(self) -> ComposeResult:
        groups = by_project(self.sessions)
        yield Static(self._title(len(groups)), id="browse-title")
        now = time.time()
        index = {id(s): i for i, s in enumerate(self.sessions)}
        options: list[Option | None] = []
        for project, found in groups:
            options.append(Option(Text(f"{project}  ({len(found)})", style="bold underline"), disabled=True))
            options.extend(Option(row(s, now), id=str(index[id(s)])) for s in found)
        yield OptionList(*options, id="sessions")
        yield Footer()

    def _title(self, projects: int) -> str:
        return f"{plural(len(self.sessions), 'session')} in {plural(projects, 'project')} — enter opens one, F follows it"

    def on_screen_resume(self) -> None:
        """Back from a session (o): the title no longer says one is opening."""
        self.query_one("#browse-title", Static).update(self._title(len(by_project(self.sessions))))

    def on_mount(self) -> None:
        lst = self.query_one(OptionList)
        lst.focus()
        lst.action_first()   # the newest session (the first row is its project's heading)

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self, follow: bool = False) -> None:
        lst = self.query_one(OptionList)
        if lst.highlighted is None:
            return
        option = lst.get_option_at_index(lst.highlighted)
        if option.id is None:
            return
        self.opened_at = time.perf_counter()
        self._open(self.sessions[int(option.id)].path, follow)

    @work(exclusive=True, group="open")
    async def _open(self, path: Path, follow: bool) -> None:
        self.query_one("#browse-title", Static).update(f"opening {path.name}…")
        follower = Follower(path) if follow else None
        try:
            log = await asyncio.to_thread(follower.read) if follower else await asyncio.to_thread(load_session, path)
            if log is None:
                raise SessionLogError(f"{path}: nothing complete to show yet")
            args = argparse.Namespace(policy=None, preset=None, window=None)
            policy = resolve_policy(args, log)
        except (SessionLogError, PolicyError) as exc:
            self.notify(str(exc), title="This session cannot be opened", severity="error", timeout=10)
            return
        self.app.open_session(log, policy, args.window_source, follower)
