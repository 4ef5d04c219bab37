"""Session memory on disk: `<workspace>/.agent/MEMORY.md`, its overflow fragments, one lock.

Bounded append (seed 003 §3.1): under the lock, `MEMORY.md` takes an entry while it stays
within `max_lines` lines; beyond, the entry goes to `auto-YYYY-MM-DD-xxx.md` and `MEMORY.md`
gets a one-line pointer. The bound counts the pointers too: once `MEMORY.md` has no line left
even for a pointer, pointers go to the fragment index `MEMORY-index.md`, read right after it.
Nothing is ever dropped.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Iterator

import filelock

from breakwater.memory.durable import append_durably, create_unique
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

MEMORY_NAME = "MEMORY.md"
INDEX_NAME = "MEMORY-index.md"
AGENT_DIR = ".agent"


class MemoryLockTimeout(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class AppendResult:
    path: Path           # the file that took the entry: MEMORY.md or a new fragment
    overflow: bool
    memory_lines: int    # lines in MEMORY.md after the append


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything remembered, read at one moment: entries in the order they were written."""

    entries: tuple[Entry, ...]
    fragments: tuple[Path, ...]


class MemoryStore:
    def __init__(self, workspace: str | os.PathLike[str], *, max_lines: int = 150,
                 lock_timeout: float = 60.0) -> None:
        self.workspace = Path(workspace)
        self.root = self.workspace / AGENT_DIR
        self.memory_path = self.root / MEMORY_NAME
        self.index_path = self.root / INDEX_NAME
        self.gc_path = self.root / ".memory_gc"
        self.lock_path = self.root / "memory.lock"
        self.max_lines = max_lines
        self.lock_timeout = lock_timeout

    @contextmanager
    def locked(self, timeout: float | None = None) -> Iterator[None]:
        """The cross-process lock every writer of this directory holds."""
        self.root.mkdir(parents=True, exist_ok=True)
        wait = self.lock_timeout if timeout is None else timeout
        # A fresh lock object per use: each thread then holds its own descriptor, so threads
        # of one process exclude each other as processes do. filelock polls; a short interval
        # keeps one busy writer from starving the others (50 ms let one process take ~all turns).
        lock = filelock.FileLock(self.lock_path, timeout=wait, poll_interval=0.002)
        try:
            lock.acquire()
        except filelock.Timeout:
            raise MemoryLockTimeout(f"memory is locked by another process ({self.lock_path}); "
                                    f"gave up after {wait:g}s") from None
        try:
            yield
        finally:
            lock.release()

    def append(self, bullets: str, turn: int, *, now: datetime | None = None) -> AppendResult:
        lines = clean_bullets(bullets)
        if not lines:
            raise ValueError("nothing to remember: the entry has no bullets")
        now = now or datetime.now()
        entry = format_entry(format_header(turn, now), lines)
        entry_lines = len(lines) + 2
        with self.locked():
            current = _read_bytes(self.memory_path)
            lead = "\n" if current and not current.endswith(b"\n") else ""
            count = current.count(b"\n") + len(lead)
            if count + entry_lines <= self.max_lines:
                append_durably(self.memory_path, lead + entry)
                return AppendResult(self.memory_path, False, count + entry_lines)
            # Fragment first, pointer second: a crash in between leaves an orphan fragment,
            # which readers still find, never a pointer to nothing.
            fragment = create_unique(self.root, f"auto-{now:%Y-%m-%d}-", entry)
            pointer = overflow_pointer(fragment.name, turn) + "\n"
            if count + 1 <= self.max_lines:
                append_durably(self.memory_path, lead + pointer)
                return AppendResult(fragment, True, count + 1)
            index = _read_bytes(self.index_path)
            append_durably(self.index_path, ("\n" if index and not index.endswith(b"\n") else "") + pointer)
            return AppendResult(fragment, True, count)

    def fragment_paths(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(self.root.glob(FRAGMENT_GLOB))

    def read_memory(self) -> str:
        return _read_bytes(self.memory_path).decode("utf-8", errors="replace")

    def signature(self) -> tuple:
        """Changes whenever MEMORY.md or a fragment is written, replaced, added or removed."""
        parts = []
        for path in (self.memory_path, *self.fragment_paths()):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            parts.append((path.name, st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(parts)

    def snapshot(self) -> Snapshot:
        """All entries in write order: fragments are read where their pointer stands.

        A fragment no pointer names (left by a crash) is older than what MEMORY.md holds,
        so it comes first.
        """
        items = parse(self.read_memory(), MEMORY_NAME)
        items += [i for i in parse(_read_bytes(self.index_path).decode("utf-8", errors="replace"), INDEX_NAME)
                  if isinstance(i, Pointer)]
        fragments = {p.name: p for p in self.fragment_paths()}
        named = {i.name for i in items if isinstance(i, Pointer)}
        orphans = sorted((n for n in fragments if n not in named), key=lambda n: (_mtime(fragments[n]), n))
        entries: list[Entry] = []
        spliced: set[str] = set()
        for name in orphans:
            entries.extend(_fragment_entries(fragments[name]))
        for item in items:
            if isinstance(item, Entry):
                entries.append(item)
            elif item.name in fragments and item.name not in spliced:
                spliced.add(item.name)
                entries.extend(_fragment_entries(fragments[item.name]))
        return Snapshot(tuple(entries), tuple(fragments.values()))


def _fragment_entries(path: Path) -> list[Entry]:
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:  # removed by a consolidation since we listed it
        return []
    return [i for i in parse(text, path.name) if isinstance(i, Entry)]


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
