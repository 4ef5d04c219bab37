"""Cold consolidation (seed 003 §3.2): fold the fragments back into one deduplicated memory.

Runs when there are at least `threshold` fragments and `.memory_gc` is older than the
cool-down (or missing), or when forced. Under the lock it reads everything, merges, writes
the new `MEMORY.md` atomically, and only then deletes the fragments it read. A crash at any
point leaves the old files, or the new `MEMORY.md` beside some fragments whose facts it
already holds: never fewer facts. A journal written just before the replace names those
fragments, so readers skip them (a leftover read after the new `MEMORY.md` would put an old
[PROGRESS] last) and the next writer deletes them.

If the merged memory is longer than `max_lines`, the older entries move to one archive
fragment that the new `MEMORY.md` points to, so the hot file stays bounded.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Sequence

from breakwater.memory.durable import free_name
from breakwater.memory.entries import (
    RULE,
    Entry,
    bullet_key,
    format_entry,
)
from breakwater.memory.ledger import OTHER
from breakwater.memory.store import FOLD_JOURNAL, MEMORY_NAME, TEMP_PREFIX, MemoryStore

PAUSE_ENV = "BREAKWATER_TEST_PAUSE_AT"
DAY_S = 86_400.0


def _checkpoint(name: str) -> None:
    """Crash tests stop the process here: it says where it is, then waits to be killed."""
    if os.environ.get(PAUSE_ENV) == name:
        print(f"paused at {name}", file=sys.stderr, flush=True)
        time.sleep(3600)


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    ran: bool
    reason: str
    fragments_removed: int = 0
    bullets_before: int = 0
    bullets_after: int = 0
    memory_lines: int = 0
    archive: str | None = None  # the fragment now holding entries older than MEMORY.md's

    def describe(self) -> str:
        if not self.ran:
            return f"not consolidated: {self.reason}"
        text = (f"consolidated: {self.bullets_before} bullets -> {self.bullets_after}, "
                f"{self.fragments_removed} fragment{'' if self.fragments_removed == 1 else 's'} removed, "
                f"MEMORY.md has {self.memory_lines} line{'' if self.memory_lines == 1 else 's'}")
        if self.archive:
            text += f", older entries in {self.archive}"
        return text


def due(store: MemoryStore, *, threshold: int = 12, cooldown_days: float = 7.0,
        now: float | None = None) -> tuple[bool, str]:
    count = len(store.fragment_paths())
    if count < threshold:
        return False, f"{count} fragments (fewer than {threshold})"
    try:
        age = (time.time() if now is None else now) - store.dir.stat(store.gc_path.name).st_mtime
    except FileNotFoundError:
        return True, f"{count} fragments, never consolidated"
    if age < cooldown_days * DAY_S:
        return False, f"last consolidation {age / DAY_S:.1f} days ago (cool-down {cooldown_days:g} days)"
    return True, f"{count} fragments, last consolidation {age / DAY_S:.1f} days ago"


def merge(entries: Sequence[Entry]) -> list[Entry]:
    """Each fact once, where it was last said; only the latest entry's [PROGRESS] survives.

    Pure: the same entries give the same result. Entries keep their headers and order;
    those left without bullets disappear.
    """
    return [entry for _, entry in merge_indexed(entries)]


def merge_indexed(entries: Sequence[Entry]) -> list[tuple[int, Entry]]:
    """`merge`, each merged entry with the index of the entry it comes from (whose writer it keeps)."""
    progress_at = max((i for i, e in enumerate(entries) for ln in e.lines
                       if bullet_key(ln)[0] == "PROGRESS"), default=-1)
    winner: dict[tuple[str, str], tuple[int, int]] = {}
    for i, entry in enumerate(entries):
        for j, line in enumerate(entry.lines):
            key = bullet_key(line)
            if key[0] == "PROGRESS" and i != progress_at:
                continue
            winner[key] = (i, j)
    kept = set(winner.values())
    merged = []
    for i, entry in enumerate(entries):
        lines = tuple(ln for j, ln in enumerate(entry.lines) if (i, j) in kept)
        if lines:
            merged.append((i, Entry(entry.header, lines, MEMORY_NAME)))
    return merged


def render(entries: Sequence[Entry], first_line: str | None = None) -> str:
    out = [first_line + "\n"] if first_line else []
    for n, entry in enumerate(entries):
        if entry.header:
            out.append(format_entry(entry.header, entry.lines))
        else:
            # text that stood before any rule stays bare at the top; elsewhere it needs a rule
            bare = n == 0 and not first_line
            out.append(("" if bare else f"{RULE}\n") + "".join(f"{ln}\n" for ln in entry.lines))
    return "".join(out)


def _cost(entry: Entry) -> int:
    return len(entry.lines) + (2 if entry.header else 1)


def split_hot(entries: Sequence[Entry], max_lines: int) -> tuple[list[Entry], list[Entry]]:
    """(older entries for the archive, newest entries that fit MEMORY.md beside one pointer)."""
    if sum(map(_cost, entries)) <= max_lines:
        return [], list(entries)
    used, cut = 1, len(entries)  # one line for the archive pointer
    while cut > 0 and used + _cost(entries[cut - 1]) <= max_lines:
        cut -= 1
        used += _cost(entries[cut])
    return list(entries[:cut]), list(entries[cut:])


def consolidate(store: MemoryStore, *, force: bool = False, threshold: int = 12,
                cooldown_days: float = 7.0, now: datetime | None = None) -> ConsolidationReport:
    if not force:
        ok, reason = due(store, threshold=threshold, cooldown_days=cooldown_days)
        if not ok:
            return ConsolidationReport(False, reason)
    with store.locked():
        # Another process may have consolidated while we waited for the lock.
        reason = "forced"
        if not force:
            ok, reason = due(store, threshold=threshold, cooldown_days=cooldown_days)
            if not ok:
                return ConsolidationReport(False, reason)
        for folder in (store.dir, store.state):     # temp files of a crashed run (the journal's in state)
            for stale in fnmatch.filter(folder.names(), f"{TEMP_PREFIX}*.tmp"):
                folder.unlink(stale)
        store.finish_fold()
        snap = store.snapshot()
        indexed = merge_indexed(snap.entries)
        merged = [entry for _, entry in indexed]
        # each merged entry keeps its writer: the ledger vouches for the new texts before they are
        # written, and holds only them once the old files are gone
        records = [(entry.text, snap.writer_of(snap.entries[i])) for i, entry in indexed]
        for writer in {w for _, w in records if w != OTHER}:
            store.ledger.record([t for t, w in records if w == writer], writer)
        archived, hot = split_hot(merged, store.max_lines)
        _checkpoint("before_write")
        pointer = None
        archive_name = None
        if archived:
            now = now or datetime.now()
            archive_name = free_name(store.dir, f"auto-{now:%Y-%m-%d}-")
            store.dir.replace(archive_name, render(archived).encode("utf-8"), TEMP_PREFIX)
            turns = [t for t in (e.turn for e in archived) if t is not None]
            span = f"Turns {min(turns)}-{max(turns)}, " if turns else ""
            pointer = f"- [archive] see {archive_name} ({span}{len(archived)} entries)"
            _checkpoint("after_archive")
        text = render(hot, pointer)
        store.write_fold_journal(text.encode("utf-8"), [f.name for f in snap.fragments] + [store.index_path.name])
        store.dir.replace(store.memory_path.name, text.encode("utf-8"), TEMP_PREFIX, lambda: _checkpoint("after_temp"))
        _checkpoint("after_write")
        for n, fragment in enumerate(snap.fragments):
            store.dir.unlink(fragment.name)
            if n == 0:
                _checkpoint("mid_delete")
        store.dir.unlink(store.index_path.name)  # its pointers named the fragments just folded in
        store.dir.fsync()
        store.ledger.replace([r for r in records if r[1] != OTHER])
        _checkpoint("before_gc")
        store.dir.replace(store.gc_path.name, (datetime.now().isoformat(timespec="seconds") + "\n").encode(),
                          TEMP_PREFIX)
        store.state.unlink(FOLD_JOURNAL)
        return ConsolidationReport(
            True, reason,
            fragments_removed=len(snap.fragments),
            bullets_before=sum(len(e.lines) for e in snap.entries),
            bullets_after=sum(len(e.lines) for e in merged),
            memory_lines=text.count("\n"),
            archive=archive_name,
        )

