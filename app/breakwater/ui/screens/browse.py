"""`breakwater browse` (and `breakwater` alone when sessions are found): the sessions the user's
agents left (formats/sessions.py), grouped by project (with the days it covers), newest first; each
row says when the session ran, its size and messages, its model and its title or first prompt. Enter
opens one in the replay workbench, F follows it, `/` searches (formats/session_search.py).

Every name drawn here comes from files anyone can write (a project path, a model, a prompt), so each
goes through `visible`, as the message list's text does: no escape reaches the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, OptionList, Static
from textual.widgets.option_list import Option

from breakwater.core.log.json_lines import SessionLogError
from breakwater.core.log.regular_file import read_so_far
from breakwater.core.log.visible import visible
from breakwater.core.log.words import plural
from breakwater.core.policy import PolicyError
from breakwater.core.policy.for_session import resolve_policy
from breakwater.formats import load_session
from breakwater.formats.follow import Follower
from breakwater.formats.session_search import Query, message_hits
from breakwater.formats.sessions import FoundSession, by_project, date_range, day

# Sessions larger than this are not read whole in the background to count their messages or search
# them: that is a load of its own (a 2 GB session takes GBs), asked for with enter.
READ_WHOLE_MAX = 64 * 2**20
# A session's load takes up to ~3.5x its file at the peak (bench: 3.3x for a 64,000-message array)
LOAD_FACTOR = 3.5
SAY_SIZE_FROM = 100 * 2**20


def name(text: str) -> str:
    """A name on one line, drawn visibly: escapes and bidi controls as `visible` draws them, and a
    newline or tab (which a path may hold) as its picture, so a row is never split."""
    return visible(text).replace("\n", "\u2424").replace("\t", "\u2409")


def age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit} ago"
    return "just now"


def size_text(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


def when(s: FoundSession) -> str:
    """Start and end, as short as they can say it: `2026-01-05 14:02–14:40`, across days both dates."""
    start, end = s.started, s.ended
    if not start:
        return ""
    text = f"{start[:10]} {start[11:16]}".strip()
    if end and end[:16] != start[:16]:
        text += "–" + (end[11:16] if day(end) == day(start) else f"{end[5:10]} {end[11:16]}".strip())
    return text


def row(s: FoundSession, now: float, messages: int | None = None, hits: list[int] | None = None,
        width: int = 200) -> Text:
    """One line per session (never wrapped: a cut title ends in …, it does not read as a heading).
    Narrower than 150 columns, the age, the last API figure and the agent give way to the title."""
    wide = width >= 150
    text = Text("  ", no_wrap=True, overflow="ellipsis")
    if wide:
        text.append(f"{age(now - s.modified):>11}  ", style="dim")
    text.append(f"{when(s):<28}  ", style="dim")
    text.append(f"{size_text(s.size):>8}  ")
    text.append(f"{format(messages, ',') + ' msgs' if messages is not None else '… msgs':>10}  ",
                style="" if messages is not None else "dim")
    model = 28 if wide else 18
    text.append(f"{name(s.model or '?')[:model]:<{model}}  ", style="bold")
    if hits:   # a search's result: where to look comes before what else the row says
        many = 8 if wide else 4
        shown = ", ".join(map(str, hits[:many])) + (" …" if len(hits) > many else "")
        text.append(f"found at turn{'s' if len(hits) > 1 else ''} {shown}", style="bold reverse")
        text.append("  ")
    elif wide:
        text.append(f"{'last API ' + format(s.last_tokens, ',') if s.last_tokens else 'no usage recorded':<20}  ",
                    style="dim" if not s.last_tokens else "")
    if wide:
        text.append(f"{s.agent:<11}  ", style="italic")
    if s.parent:   # narrow, the title matters more than the parent's id
        text.append(f"↳ subagent of {name(s.parent)[:12]}  " if wide else "↳ subagent: ", style="italic dim")
    text.append(name(s.title) if s.title else name(s.path.name), style="" if s.title else "dim")
    return text


def heading(project: str, found: list[FoundSession]) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(name(project), style="bold underline")
    text.append(f"  ({len(found)})", style="bold")
    span = date_range(found)
    if span:
        text.append(f"  {span}", style="dim")
    return text


def available_memory() -> int | None:
    """Bytes the machine can give a new load without swapping (MemAvailable), when it says."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


async def in_daemon_thread(fn, *args):
    """`fn(*args)` in a thread the process does not wait for when it ends: quitting while a large
    session loads ends at once (asyncio.to_thread's thread was joined at exit: 25 s for 2 GB)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future = loop.create_future()

    def settle(result, error) -> None:
        if not done.done():
            done.set_exception(error) if error is not None else done.set_result(result)

    def run() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task as it is
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:
            pass   # the app ended while this loaded: nobody waits for it

    threading.Thread(target=run, name="breakwater-open", daemon=True).start()
    return await done


class ConfirmLargeScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmLargeScreen { align: center middle; }
    ConfirmLargeScreen > Vertical { width: 80; height: auto; border: thick $warning; padding: 1 2;
                                    background: $surface; }
    """
    BINDINGS = [Binding("y", "answer(True)", "Open anyway"), Binding("n,escape", "answer(False)", "Cancel")]

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.text))
            yield Static(Text("y opens it anyway · n or esc goes back", style="bold"))

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class BrowseScreen(Screen):
    DEFAULT_CSS = """
    BrowseScreen #browse-title { height: 1; padding: 0 1; background: $surface; }
    BrowseScreen #browse-search { display: none; height: 3; }
    BrowseScreen #browse-search.shown { display: block; }
    BrowseScreen OptionList { height: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    BINDINGS = [Binding("enter", "open", "Open", id="browse.open", tooltip="Open the session in the workbench"),
                Binding("F", "open(True)", "Follow", id="browse.follow",
                        tooltip="Open the session and follow it while its agent writes it"),
                Binding("slash", "search", "Search", id="browse.search",
                        tooltip="Search every session: words in names, first prompts and messages; "
                                "model:NAME, date:2026-01 or date:2026-01-05..2026-01-09, agent:codex"),
                Binding("escape", "clear_search", "Clear search", show=False, id="browse.clear")]

    def __init__(self, sessions: list[FoundSession]):
        super().__init__()
        self.sessions = sessions
        self.opened_at: float | None = None   # when enter was pressed (the bench reads it)
        self.counts: dict[int, int] = {}      # messages of each session read whole (by index)
        self.search_query = Query()
        self.hits: dict[int, list[int]] | None = None   # turns of each message hit, once searched
        self.searched: str | None = None      # what the hits are of (the words last searched)
        self.opening: str | None = None       # the session being opened, for the title

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="browse-title")
        yield Input(id="browse-search", placeholder="words, model:NAME, date:2026-01, agent:codex — "
                                                    "enter searches the messages too, esc clears")
        yield OptionList(*self._options(), id="sessions")
        yield Footer()

    # -- the list ------------------------------------------------------------------------------------
    def _shown(self) -> list[int]:
        q = self.search_query
        out = []
        for i, s in enumerate(self.sessions):
            if not q.keeps(s):
                continue
            if q.words:
                named = q.names_match(s)
                if len(named) < len(q.words) and not (self.hits is not None and i in self.hits):
                    continue
            out.append(i)
        return out

    def _options(self) -> list[Option]:
        now = time.time()
        shown = [self.sessions[i] for i in self._shown()]
        index = {id(s): i for i, s in enumerate(self.sessions)}
        options: list[Option] = []
        for project, found in by_project(shown):
            options.append(Option(heading(project, found), disabled=True))
            options.extend(Option(self._row(index[id(s)], now), id=str(index[id(s)])) for s in found)
        return options

    def _row(self, i: int, now: float | None = None) -> Text:
        hits = self.hits.get(i) if self.hits is not None else None
        return row(self.sessions[i], now or time.time(), self.counts.get(i), hits, self.app.size.width)

    def _fill(self) -> None:
        lst = self.query_one(OptionList)
        current = lst.highlighted_option.id if lst.highlighted_option is not None else None
        lst.clear_options()
        lst.add_options(self._options())
        try:
            lst.highlighted = lst.get_option_index(current) if current else None
        except Exception:  # noqa: BLE001 - OptionDoesNotExist: the session is filtered out
            lst.highlighted = None
        if lst.highlighted is None and lst.option_count:
            lst.action_first()
        self._set_title()

    def _title(self) -> str:
        shown = self._shown()
        groups = len(by_project([self.sessions[i] for i in shown]))
        if self.opening:
            return self.opening
        what = f"{plural(len(shown), 'session')} in {plural(groups, 'project')}"
        if not self.search_query.empty:
            what += f" of {len(self.sessions):,} match “{visible(self.searched or '')}”" if self.hits is not None \
                else f" of {len(self.sessions):,} match by name, title or model (enter searches the messages)"
        return f"{what} — enter opens one, F follows it, / searches"

    def _set_title(self, text: str | None = None) -> None:
        self.query_one("#browse-title", Static).update(Text(text if text is not None else self._title(),
                                                            no_wrap=True, overflow="ellipsis"))

    def on_resize(self) -> None:
        if self.query(OptionList):
            self._fill()

    def on_screen_resume(self) -> None:
        """Back from a session (o): the title no longer says one is opening."""
        self.opening = None
        self._set_title()

    def on_mount(self) -> None:
        lst = self.query_one(OptionList)
        lst.focus()
        lst.action_first()   # the newest session (the first row is its project's heading)
        self._count()

    @work(exclusive=True, group="count")
    async def _count(self) -> None:
        """The messages of each session (the smaller ones, newest first), read whole in the background
        (each in a daemon thread: quitting does not wait for a load under way)."""
        for i, s in enumerate(self.sessions):
            if s.size > READ_WHOLE_MAX:
                continue
            try:
                log = await in_daemon_thread(load_session, s.path)
            except (SessionLogError, OSError, ValueError):
                continue
            self._counted(i, len(log.messages))
            del log

    def _counted(self, i: int, n: int) -> None:
        self.counts[i] = n
        lst = self.query_one(OptionList)
        try:
            lst.replace_option_prompt(str(i), self._row(i))
        except Exception:  # noqa: BLE001 - OptionDoesNotExist: not shown under the current search
            pass

    # -- search --------------------------------------------------------------------------------------
    def action_search(self) -> None:
        box = self.query_one("#browse-search", Input)
        box.add_class("shown")
        box.focus()

    def action_clear_search(self) -> None:
        box = self.query_one("#browse-search", Input)
        self.workers.cancel_group(self, "search")
        box.value = ""
        box.remove_class("shown")
        self.search_query, self.hits, self.searched = Query(), None, None
        self._fill()
        self.query_one(OptionList).focus()

    @on(Input.Changed, "#browse-search")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        self.workers.cancel_group(self, "search")
        self.search_query = Query.parse(event.value)
        self.hits, self.searched = None, None
        self._fill()

    @on(Input.Submitted, "#browse-search")
    def _search_messages(self, event: Input.Submitted) -> None:
        event.stop()
        self.search_query = Query.parse(event.value)
        if not self.search_query.words:
            self.query_one(OptionList).focus()
            return
        self._search(self.search_query, event.value)

    @work(exclusive=True, group="search")
    async def _search(self, query: Query, said: str) -> None:
        """Read each session the filters keep and find the words in its messages (every word in the
        names and messages together), with the turns of the hits."""
        candidates = [i for i, s in enumerate(self.sessions) if query.keeps(s)]
        hits: dict[int, list[int]] = {}
        skipped = 0
        for k, i in enumerate(candidates):
            s = self.sessions[i]
            self._set_title(f"searching {k + 1:,} of {len(candidates):,} sessions for “{visible(said)}”… (esc stops)")
            named = set(query.names_match(s))
            if s.size > READ_WHOLE_MAX:
                skipped += 1
                if len(named) == len(query.words):
                    hits[i] = []
                continue
            try:
                turns, found = await in_daemon_thread(lambda p: message_hits(load_session(p), query.words), s.path)
            except (SessionLogError, OSError, ValueError):
                continue
            if len(named | found) == len(query.words):
                hits[i] = turns
        self._searched(hits, said, skipped)

    def _searched(self, hits: dict[int, list[int]], said: str, skipped: int) -> None:
        self.hits, self.searched = hits, said
        self._fill()
        if skipped:
            self.notify(f"{plural(skipped, 'session')} over {size_text(READ_WHOLE_MAX)} were matched by name "
                        f"only: open one to search it (/ in the workbench)", timeout=8)
        self.query_one(OptionList).focus()

    # -- opening -------------------------------------------------------------------------------------
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
        s = self.sessions[int(option.id)]
        hits = (self.hits or {}).get(int(option.id))
        turn = hits[0] if hits and not follow else None   # a search's result opens at its first hit
        need = s.size * LOAD_FACTOR
        free = available_memory()
        if free is not None and need > free:
            text = (f"{s.path.name} is {size_text(s.size)}: opening it takes about {size_text(need)} of memory, "
                    f"and this machine has {size_text(free)} free. It may swap or be killed.")
            self.app.push_screen(ConfirmLargeScreen(visible(text)),
                                 lambda yes: self._open(s.path, follow, s.size, turn) if yes else None)
            return
        self._open(s.path, follow, s.size, turn)

    @work(exclusive=True, group="open")
    async def _open(self, path: Path, follow: bool, size: int = 0, turn: int | None = None) -> None:
        shown_name = name(path.name)
        started = time.monotonic()
        big = f" ({size_text(size)})" if size >= SAY_SIZE_FROM else ""

        def progress() -> None:
            # how much of the file the load has read (a buffered reader's offset runs ahead of the parse by
            # one buffer): a share a user can judge a large file's wait by; elapsed seconds before and after
            done = read_so_far(path) if size else None
            share = f"{min(done / size, 1):.0%} read, " if done else ""
            self.opening = f"opening {shown_name}{big}… {share}{time.monotonic() - started:.0f} s — ctrl+q quits"
            self._set_title()

        progress()
        ticker = self.set_interval(0.5, progress)
        follower = Follower(path) if follow else None
        try:
            log = await in_daemon_thread(follower.read if follower else load_session, *(() if follower else (path,)))
            if log is None:
                raise SessionLogError(f"{path}: nothing complete to show yet")
            args = argparse.Namespace(policy=None, preset=None, window=None)
            policy = resolve_policy(args, log)
        except (SessionLogError, PolicyError, OSError) as exc:
            self.notify(visible(str(exc)), title="This session cannot be opened", severity="error", timeout=10)
            return
        finally:
            ticker.stop()
            self.opening = None
            self._set_title()
        if turn is not None and not 1 <= turn <= log.turn_count() + 1:
            turn = None
        self.app.open_session(log, policy, args.window_source, follower, turn)
