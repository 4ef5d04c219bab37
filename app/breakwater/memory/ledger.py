"""Who wrote each memory entry (issue 27 item 8).

The memory files sit in the workspace, where the agent's tools write too: a command, or the
model through `write_file`, can add an entry that reads like one of the scribe's. So whenever
Breakwater itself writes an entry it records the entry's digest and its writer in a ledger kept
with Breakwater's own state (`.agent/state/`, read-only to the tools: bound read-only in the
sandbox, refused by `write_file`). An entry whose digest the ledger lacks was written by
something else: a tool, the model through a tool, or a person editing the file. It is marked
so in `memory show`/`search` and in the prompt, where it is quoted as data.

The digest covers the entry's header and every bullet, so a bullet slipped under one of the
scribe's headers makes the whole entry another writer's.
"""

from __future__ import annotations

import hashlib
import os
from typing import Iterable, Mapping

from breakwater.core.log.beneath import OwnedDir, SetAside, replace_beneath

STATE_DIR = ".agent/state"          # one of AGENT_STATE in tools/workspace.py
MEMORY_LEDGER = "memory-writers"    # MEMORY.md and its fragments (under the memory lock)
PROJECT_LEDGER = "project-writers"  # PROJECT_MEMORY.md (under the project memory lock)
MAX_LEDGER_BYTES = 64 * 1024 * 1024

SCRIBE = "scribe"              # the agent's scribe, during a session
USER = "memory add"            # a person, through `breakwater memory add`
SESSION_END = "session end"    # the session's summary in PROJECT_MEMORY.md
OTHER = "other"                # no record: a tool, the model through one, or an edit by hand
DESCRIBE = {
    SCRIBE: "Breakwater's scribe",
    USER: "the user (breakwater memory add)",
    SESSION_END: "Breakwater, at a session's end",
    OTHER: "something other than Breakwater: a tool, the model or a hand edit",
}


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def describe(writer: str) -> str:
    return DESCRIBE.get(writer, DESCRIBE[OTHER])


class Ledger:
    """One ledger file: `<digest> <writer>` lines, appended durably before the entry is written
    (a crash in between leaves a record of nothing, never an entry of Breakwater's without one)."""

    def __init__(self, workspace: str | os.PathLike, name: str = MEMORY_LEDGER):
        self.dir = OwnedDir(workspace, STATE_DIR)
        self.name = name
        self.mark: tuple[int, int, int, int] | None = None   # the file as this object's last write left it

    def record(self, texts: Iterable[str], writer: str) -> SetAside | None:
        """Append the records, whole or not at all; a torn last line found first is set aside (returned)."""
        lines = "".join(f"{digest(t)} {writer}\n" for t in texts)
        if not lines:
            return None
        aside = self.dir.append(self.name, lines.encode())
        self._remember()
        return aside

    def replace(self, records: Iterable[tuple[str, str]]) -> None:
        """The ledger becomes exactly these (text, writer) records: consolidation keeps it to the
        entries that still exist."""
        data = "".join(f"{digest(t)} {w}\n" for t, w in records).encode()
        with self.dir.fd() as d:
            replace_beneath(d, self.name, data)
        self._remember()

    def _remember(self) -> None:
        st = self.dir.stat(self.name)
        self.mark = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def writers(self) -> Mapping[str, str]:
        """digest -> writer; empty when there is no ledger (or it is unreadable: nothing vouched)."""
        try:
            data = self.dir.read(self.name, MAX_LEDGER_BYTES)
        except OSError:
            return {}
        known: dict[str, str] = {}
        for line in data.decode("ascii", "replace").splitlines():
            key, _, writer = line.partition(" ")
            if len(key) == 32 and writer in DESCRIBE:
                known[key] = writer
        return known

    def writer_of(self, text: str, known: Mapping[str, str] | None = None) -> str:
        return (self.writers() if known is None else known).get(digest(text), OTHER)
