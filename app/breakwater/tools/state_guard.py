"""What a command did to Breakwater's own state, found after it ran (issue 27 item 8).

Inside bubblewrap the state folders are read-only. Without it a command runs as the user, and
nothing stops it writing there: what can be done is to notice it after the call, undo what can
be undone (the session log is rewritten from what Breakwater logged, `SessionLog.restore_if_changed`)
and tell the model. A spill file holds a call's output and nothing else has a copy, so a changed
one is reported, not restored.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Mapping

from breakwater.core.log.beneath import OwnedDir
from breakwater.core.log.session_log import SessionLog
from breakwater.tools.result import ToolResult

# the folders whose every file is Breakwater's (spill folders are many and large: each session
# checks its own spills, SpillMarks)
STATE_FOLDERS = (".agent/sessions", ".agent/state")
Identity = tuple[int, int, int, int]

STATE_NOTICE = ("[Breakwater's own state under .agent/ (session log, spill files, ledgers) is not the tools' to "
                "write: {what}]")


def _identity(st: os.stat_result) -> Identity:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class SpillMarks:
    """The spill files of a session as Breakwater left them, to find those a later command changed."""

    def __init__(self, root: str | os.PathLike):
        self.root = root
        self._marks: dict[str, Identity] = {}
        self._lock = threading.Lock()

    def _stat(self, rel: str) -> Identity | None:
        folder, _, name = rel.rpartition("/")
        try:
            return _identity(OwnedDir(self.root, folder).stat(name))
        except OSError:     # gone, or its folder replaced by a link: changed either way
            return None

    def mark(self, rel: str) -> None:
        """`rel` is as Breakwater wrote it (after its redaction, if any)."""
        found = self._stat(rel)
        with self._lock:
            if found is not None:
                self._marks[rel] = found

    def changed(self) -> list[str]:
        """The spill files changed, replaced or removed since they were marked; each is reported once."""
        with self._lock:
            marks = list(self._marks.items())
        gone = [rel for rel, mark in marks if self._stat(rel) != mark]
        with self._lock:
            for rel in gone:
                self._marks.pop(rel, None)
        return gone


def state_files(root: str | os.PathLike) -> dict[str, Identity | None]:
    """Every file of the state folders as it is now (a folder that cannot be opened with no link
    followed stands as None)."""
    found: dict[str, Identity | None] = {}
    for rel in STATE_FOLDERS:
        folder = OwnedDir(root, rel)
        try:
            names = folder.names()
        except OSError:
            found[rel] = None
            continue
        for name in names:
            try:
                found[f"{rel}/{name}"] = _identity(folder.stat(name))
            except OSError:
                pass
    return found


def changed_files(before: Mapping[str, Identity | None], after: Mapping[str, Identity | None],
                  own: Callable[[str, Identity | None], bool]) -> list[str]:
    """The files added, removed or changed between two `state_files`, but those `own` says this
    process wrote meanwhile."""
    return sorted(rel for rel in before.keys() | after.keys()
                  if before.get(rel) != after.get(rel) and not own(rel, after.get(rel)))


def describe(log_change: str | None, spills: list[str], others: list[str] = ()) -> str | None:
    """The notice for the model, or None when nothing was changed."""
    found = [log_change] if log_change else []
    if others:
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        found.append(f"{shown} changed while the command ran (by it, or by another Breakwater in this "
                     "workspace); Breakwater has no copy to restore")
    if spills:
        shown = ", ".join(spills[:5]) + (f" and {len(spills) - 5} more" if len(spills) > 5 else "")
        one = len(spills) == 1
        found.append(f"the spill file{'' if one else 's'} {shown} of earlier calls {'was' if one else 'were'} changed "
                     f"and no longer hold{'s' if one else ''} what those calls printed")
    return STATE_NOTICE.format(what="; ".join(found)) if found else None


class StateGuard:
    """One session's check around each of its commands: `before()` when the command starts,
    `after()` with its result (which gains the notice when anything was changed). `own(rel,
    identity)` says which changes this process made meanwhile (its scribe's ledger)."""

    def __init__(self, root: str | os.PathLike, log: SessionLog,
                 own: Callable[[str, Identity | None], bool] = lambda rel, now: False):
        self.root = root
        self.log = log
        self.own = own
        self.spills = SpillMarks(root)

    def before(self) -> dict[str, Identity | None]:
        return state_files(self.root)

    def after(self, result: ToolResult, before: Mapping[str, Identity | None]) -> ToolResult:
        try:
            log_change = self.log.restore_if_changed()
        except OSError as exc:
            log_change = f"the session log was changed and could not be restored ({exc.strerror or exc})"
        log_rel = os.path.relpath(self.log.path, self.root) if self.log.path is not None else None
        others = changed_files(before, state_files(self.root),
                               lambda rel, now: rel == log_rel or self.own(rel, now))   # the log: restored above
        notice = describe(log_change, self.spills.changed(), others)
        if result.meta.get("spill"):
            self.spills.mark(result.meta["spill"])
        if notice is None:
            return result
        return ToolResult(f"{result.content}\n{notice}", {**result.meta, "state_changed": notice})
