"""Session memory on disk: `<workspace>/.agent/MEMORY.md`, its overflow fragments, one lock.

Bounded append (seed 003 §3.1): under the lock, `MEMORY.md` takes an entry while it stays
within `max_lines` lines; beyond, the entry goes to `auto-YYYY-MM-DD-xxx.md` and `MEMORY.md`
gets a one-line pointer. The bound counts the pointers too: once `MEMORY.md` has no line left
even for a pointer, pointers go to the fragment index `MEMORY-index.md`, read right after it.
Nothing is ever dropped. A consolidation that crashed after replacing `MEMORY.md` is finished
by the next writer (see `finish_fold`); readers skip the files it had already folded in.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterator, Mapping

from breakwater.core.log.beneath import OwnedDir, SetAside
from breakwater.memory.durable import create_unique
from breakwater.memory.entries import (
    FRAGMENT_GLOB,
    Entry,
    Pointer,
    clean_bullets,
    format_entry,
    format_header,
    overflow_pointer,
    parse,
)
from breakwater.memory.ledger import OTHER, SCRIBE, STATE_DIR, Ledger, digest

MEMORY_NAME = "MEMORY.md"
INDEX_NAME = "MEMORY-index.md"
FOLD_JOURNAL = ".memory-folded"  # what a consolidation folded into the MEMORY.md it wrote (in STATE_DIR)
TEMP_PREFIX = ".consolidate-"     # temp files of a consolidation; a crashed run's are deleted by the next
AGENT_DIR = ".agent"


class MemoryLockTimeout(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class AppendResult:
    path: Path           # the file that took the entry: MEMORY.md or a new fragment
    overflow: bool
    memory_lines: int    # lines in MEMORY.md after the append
    set_aside: tuple[SetAside, ...] = ()   # torn last lines moved out of the files appended to, first


def _kept(found: list[SetAside | None]) -> tuple[SetAside, ...]:
    return tuple(a for a in found if a is not None)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything remembered, read at one moment: entries in the order they were written."""

    entries: tuple[Entry, ...]
    fragments: tuple[Path, ...]
    writers: Mapping[str, str] = field(default_factory=dict)   # the ledger's digest -> writer

    def writer_of(self, entry: Entry) -> str:
        """Who wrote `entry` (memory/ledger.py): SCRIBE, USER, or OTHER when Breakwater has no record."""
        return self.writers.get(digest(entry.text), OTHER)


class MemoryStore:
    def __init__(self, workspace: str | os.PathLike[str], *, max_lines: int = 150,
                 lock_timeout: float = 60.0) -> None:
        self.workspace = Path(workspace)
        # every file here is opened with no symlink followed below the workspace (issue 27 item 1)
        self.dir = OwnedDir(self.workspace, AGENT_DIR)
        self.root = self.dir.path
        self.memory_path = self.root / MEMORY_NAME
        self.index_path = self.root / INDEX_NAME
        self.gc_path = self.root / ".memory_gc"
        self.lock_path = self.root / "memory.lock"
        self.max_lines = max_lines
        self.lock_timeout = lock_timeout
        self.ledger = Ledger(self.workspace)
        # the fold journal names files to delete: it is kept where the tools cannot write (issue 27 item 8)
        self.state = OwnedDir(self.workspace, STATE_DIR)

    @contextmanager
    def locked(self, timeout: float | None = None) -> Iterator[None]:
        """The cross-process lock every writer of this directory holds."""
        wait = self.lock_timeout if timeout is None else timeout
        try:
            with self.dir.lock(self.lock_path.name, wait):
                yield
        except TimeoutError:
            raise MemoryLockTimeout(f"memory is locked by another process ({self.lock_path}); "
                                    f"gave up after {wait:g}s") from None

    def append(self, bullets: str, turn: int, *, now: datetime | None = None,
               writer: str = SCRIBE) -> AppendResult:
        """Append one entry, recorded in the ledger as `writer`'s."""
        lines = clean_bullets(bullets)
        if not lines:
            raise ValueError("nothing to remember: the entry has no bullets")
        now = now or datetime.now()
        header = format_header(turn, now)
        entry = format_entry(header, lines)
        entry_lines = len(lines) + 2
        with self.locked():
            self.finish_fold()
            aside = [self.ledger.record([Entry(header, tuple(lines), MEMORY_NAME).text], writer)]
            # a last line without its newline (a hand edit, a crash) is copied beside the file and ended
            # there by the append, never extended (a person's note stays where they wrote it)
            current = self.dir.read(MEMORY_NAME)
            count = current.count(b"\n") + int(bool(current) and not current.endswith(b"\n"))
            if count + entry_lines <= self.max_lines:
                aside.append(self.dir.append(MEMORY_NAME, entry.encode("utf-8"), end_torn=True))
                return AppendResult(self.memory_path, False, count + entry_lines, _kept(aside))
            # Fragment first, pointer second: a crash in between leaves an orphan fragment,
            # which readers still find, never a pointer to nothing.
            fragment = create_unique(self.dir, f"auto-{now:%Y-%m-%d}-", entry)
            pointer = overflow_pointer(fragment, turn) + "\n"
            if count + 1 <= self.max_lines:
                aside.append(self.dir.append(MEMORY_NAME, pointer.encode("utf-8"), end_torn=True))
                return AppendResult(self.root / fragment, True, count + 1, _kept(aside))
            aside.append(self.dir.append(INDEX_NAME, pointer.encode("utf-8"), end_torn=True))
            return AppendResult(self.root / fragment, True, count, _kept(aside))

    def write_fold_journal(self, new_memory: bytes, folded: list[str]) -> None:
        """Before a consolidation replaces MEMORY.md: the files its new text already holds.

        Once MEMORY.md is that text, those files are leftovers until deleted: a crash in
        between must not let a reader place them after the entries that replaced them.
        """
        digest = hashlib.sha256(new_memory).hexdigest()
        self.state.replace(FOLD_JOURNAL, "".join(f"{line}\n" for line in [digest, *folded]).encode("utf-8"),
                           TEMP_PREFIX)

    def folded(self) -> frozenset[str]:
        """The files a finished MEMORY.md replace made leftovers of (empty when none are)."""
        journal = self.state.read(FOLD_JOURNAL).decode("utf-8", errors="replace").splitlines()
        if not journal or hashlib.sha256(self.dir.read(MEMORY_NAME)).hexdigest() != journal[0]:
            return frozenset()
        # only what a consolidation folds: fragments and the index, never another file
        return frozenset(n for n in journal[1:]
                         if n == INDEX_NAME or ("/" not in n and fnmatch.fnmatch(n, FRAGMENT_GLOB)))

    def finish_fold(self) -> None:
        """Under the lock: finish what a crashed consolidation left (delete the leftovers),
        or forget its journal when it never replaced MEMORY.md."""
        if not self.state.exists(FOLD_JOURNAL):
            return
        for name in sorted(self.folded()):
            self.dir.unlink(name)
        self.dir.fsync()
        self.state.unlink(FOLD_JOURNAL)

    def fragment_paths(self) -> list[Path]:
        return sorted(self.root / n for n in fnmatch.filter(self.dir.names(), FRAGMENT_GLOB))

    def read_memory(self) -> str:
        return self.dir.read(MEMORY_NAME).decode("utf-8", errors="replace")

    def signature(self) -> tuple:
        """Changes whenever MEMORY.md or a fragment is written, replaced, added or removed."""
        parts = []
        for path in (self.memory_path, *self.fragment_paths()):
            try:
                st = self.dir.stat(path.name)
            except FileNotFoundError:
                continue
            parts.append((path.name, st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(parts)

    def snapshot(self) -> Snapshot:
        """All entries in write order: fragments are read where their pointer stands.

        A fragment no pointer names (left by a crash) is older than what MEMORY.md holds,
        so it comes first.
        """
        folded = self.folded()
        items = parse(self.read_memory(), MEMORY_NAME)
        if INDEX_NAME not in folded:
            items += [i for i in parse(self.dir.read(INDEX_NAME).decode("utf-8", errors="replace"), INDEX_NAME)
                      if isinstance(i, Pointer)]
        fragments = {p.name: p for p in self.fragment_paths() if p.name not in folded}
        named = {i.name for i in items if isinstance(i, Pointer)}
        orphans = sorted((n for n in fragments if n not in named), key=lambda n: (self._mtime(n), n))
        entries: list[Entry] = []
        spliced: set[str] = set()
        for name in orphans:
            entries.extend(self._fragment_entries(name))
        for item in items:
            if isinstance(item, Entry):
                entries.append(item)
            elif item.name in fragments and item.name not in spliced:
                spliced.add(item.name)
                entries.extend(self._fragment_entries(item.name))
        return Snapshot(tuple(entries), tuple(fragments.values()), self.ledger.writers())

    def _fragment_entries(self, name: str) -> list[Entry]:
        text = self.dir.read(name).decode("utf-8", errors="replace")  # b"" if consolidated since listed
        return [i for i in parse(text, name) if isinstance(i, Entry)]

    def _mtime(self, name: str) -> float:
        try:
            return self.dir.stat(name).st_mtime
        except FileNotFoundError:
            return 0.0
