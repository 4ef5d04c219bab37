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

from breakwater.core.log.beneath import OwnedDir

STATE_NOTICE = ("[Breakwater's own state under .agent/ (session log, spill files, ledgers) is not the tools' to "
                "write: {what}]")


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class SpillMarks:
    """The spill files of a session as Breakwater left them, to find those a later command changed."""

    def __init__(self, root: str | os.PathLike):
        self.root = root
        self._marks: dict[str, tuple[int, int, int, int]] = {}
        self._lock = threading.Lock()

    def _stat(self, rel: str) -> tuple[int, int, int, int] | None:
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


def describe(log_change: str | None, spills: list[str]) -> str | None:
    """The notice for the model, or None when nothing was changed."""
    found = [log_change] if log_change else []
    if spills:
        shown = ", ".join(spills[:5]) + (f" and {len(spills) - 5} more" if len(spills) > 5 else "")
        found.append(f"the spill file{'s' if len(spills) > 1 else ''} {shown} of earlier calls "
                     f"{'were' if len(spills) > 1 else 'was'} changed and no longer hold{'' if len(spills) > 1 else 's'} "
                     "what those calls printed")
    return STATE_NOTICE.format(what="; ".join(found)) if found else None
