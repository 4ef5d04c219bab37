"""Reading spill files by line without reading them whole (SPEC §10 spill pane).

A spill file can be a gigabyte and still growing. `LineIndex` keeps one 8-byte offset per
line (an `array('q')` of the offsets just past each newline); lines are read back with
`os.pread`, only the ones asked for, each capped so a 50 MB single line costs no more than
a short one. The scans read with `pread` into one reused buffer and let numpy find the
newlines: a file that shrinks or is rewritten under us (the redactor rewrites spill files)
then gives short reads, where an mmap would kill the process with SIGBUS.

Nothing here imports Textual: the spill pane's workers call these functions and post
what they return.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from breakwater.core.log.visible import visible
from breakwater.tools.spill import SPILL_DIR, SUFFIX, safe_component

SCAN_CHUNK = 16 << 20
TAIL_BLOCK = 64 << 10
LINE_CAP = 8 << 10
"""Bytes of one line decoded for display; the rest is counted, not read."""

NEVER_CANCELLED: Callable[[], bool] = lambda: False  # noqa: E731


@dataclass(frozen=True)
class SpillFile:
    """One spill file as listed: where it is, whose it is, how big it was when listed."""

    path: Path
    session: str
    name: str
    size: int
    mtime: float


def session_spill_dir(workspace: Path, session_id: str) -> Path:
    return Path(workspace) / SPILL_DIR / safe_component(session_id, "session")


def list_spill_files(workspace: Path, session_id: str | None = None) -> list[SpillFile]:
    """The spill files of one session (every session when `session_id` is None), newest first.

    Only regular `.log` files count: a symlink planted in the spill directory is not followed.
    """
    root = Path(workspace) / SPILL_DIR
    dirs = [session_spill_dir(workspace, session_id)] if session_id is not None else _subdirs(root)
    found = []
    for directory in dirs:
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith(SUFFIX) or not entry.is_file(follow_symlinks=False):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found.append(SpillFile(Path(entry.path), directory.name, entry.name[:-len(SUFFIX)],
                                   st.st_size, st.st_mtime))
    found.sort(key=lambda f: (-f.mtime, f.session, f.name))
    return found


def _subdirs(root: Path) -> list[Path]:
    try:
        return sorted(Path(e.path) for e in os.scandir(root) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def open_spill(path: Path) -> int:
    """A read-only descriptor for `path`; a symlink is refused (ELOOP) rather than followed, and anything
    but a regular file (a FIFO the command left there would block the open and every read) is refused."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def scan_line_ends(fd: int, start: int, stop: int, *, chunk: int = SCAN_CHUNK,
                   cancelled: Callable[[], bool] = NEVER_CANCELLED) -> Iterator[tuple[int, array]]:
    """Offsets just past each newline in bytes [start, stop), one array per chunk read.

    Yields `(scanned_to, ends)`; stops early (short) if the file is shorter than `stop`
    or `cancelled()` turns true between chunks.
    """
    # imported here: the workbench loads this module at start-up, and numpy (≈0.1 s) is needed only
    # once a spill file is opened
    import numpy as np

    buf = bytearray(min(chunk, max(stop - start, 0)))
    view = memoryview(buf)
    pos = start
    while pos < stop and not cancelled():
        want = min(chunk, stop - pos)
        got = os.preadv(fd, [view[:want]], pos)
        if got <= 0:
            return
        hits = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8, count=got) == 10)
        hits += pos + 1
        ends = array("q")
        ends.frombytes(memoryview(hits.astype(np.int64, copy=False)).cast("B"))
        pos += got
        yield pos, ends


def tail_origin(fd: int, size: int, lines: int) -> int:
    """Offset where the last `lines` lines of the first `size` bytes begin (0 for fewer).

    Reads backwards a block at a time, so it costs the tail, not the file, whatever
    its size; a final newline does not count as starting an empty last line.
    """
    wanted = lines + (1 if size and os.pread(fd, 1, size - 1) == b"\n" else 0)
    pos = size
    while pos > 0:
        lo = max(0, pos - TAIL_BLOCK)
        block = os.pread(fd, pos - lo, lo)
        i = len(block)
        while wanted and (i := block.rfind(b"\n", 0, i)) != -1:
            wanted -= 1
            if not wanted:
                return lo + i + 1
        pos = lo
    return 0


class LineIndex:
    """Where each line of a file lies, for the bytes [origin, end) scanned so far.

    `ends[k]` is the offset just past the k-th newline; a last line without a newline
    yet runs to `end`. While only the tail is indexed `origin` is where it begins and
    line numbers are relative to it; `prepend` of the head makes them absolute.
    """

    def __init__(self, origin: int = 0):
        self.origin = origin
        self.end = origin
        self.ends = array("q")

    @property
    def has_head(self) -> bool:
        return self.origin == 0

    def __len__(self) -> int:
        last = self.ends[-1] if self.ends else self.origin
        return len(self.ends) + (1 if self.end > last else 0)

    def extend(self, ends: array, end: int) -> None:
        """Add the newlines found in [self.end, end)."""
        self.ends.extend(ends)
        self.end = end

    def prepend(self, head_ends: array) -> int:
        """Add the newlines found in [0, origin); returns how many lines came before.

        `head_ends` becomes the index's own array (not copied: it can be 100 MB).
        """
        count = len(head_ends)
        head_ends.extend(self.ends)
        self.ends = head_ends
        self.origin = 0
        return count

    def span(self, line: int) -> tuple[int, int]:
        """Byte range of `line` without its newline."""
        start = self.ends[line - 1] if line > 0 else self.origin
        stop = self.ends[line] - 1 if line < len(self.ends) else self.end
        return start, stop

    def line_at(self, offset: int) -> int:
        """The line holding byte `offset`."""
        return min(bisect_right(self.ends, offset), max(len(self) - 1, 0))


@dataclass(frozen=True)
class LineBytes:
    """The first bytes of one line (at most the cap) and where the line really ends."""

    data: bytes
    start: int
    stop: int

    @property
    def cut(self) -> int:
        """Bytes of the line that were not read."""
        return self.stop - self.start - len(self.data)


def read_line(fd: int, index: LineIndex, line: int, *, cap: int = LINE_CAP,
              skip: int = 0) -> LineBytes:
    """Line `line` from byte `skip` of it on, at most `cap` bytes; CR before LF dropped."""
    start, stop = index.span(line)
    begin = min(start + max(skip, 0), stop)
    data = os.pread(fd, min(cap, stop - begin), begin) if stop > begin else b""
    if begin + len(data) == stop and data.endswith(b"\r"):
        data, stop = data[:-1], stop - 1
    return LineBytes(data, begin, stop)


def read_lines(fd: int, index: LineIndex, first: int, count: int, *, cap: int = LINE_CAP) -> list[LineBytes]:
    """Lines `first`… (at most `count`), each capped like `read_line`.

    A screenful of ordinary lines is one `pread` of the bytes they span, not one per line:
    each read releases the GIL, and while a worker is indexing, winning it back is what costs.
    """
    last = min(first + count, len(index)) - 1
    if last < first:
        return []
    start, stop = index.span(first)[0], index.span(last)[1]
    if stop - start > count * cap:
        return [read_line(fd, index, line, cap=cap) for line in range(first, last + 1)]
    block = os.pread(fd, stop - start, start)
    rows = []
    for line in range(first, last + 1):
        begin, end = index.span(line)
        end = min(end, start + len(block))
        data = block[begin - start:min(end, begin + cap) - start]
        if begin + len(data) == end and data.endswith(b"\r"):
            data, end = data[:-1], end - 1
        rows.append(LineBytes(data, begin, max(end, begin)))
    return rows


def human_size(size: int) -> str:
    """`size` bytes for a person: 512 B, 3.4 KB, 1.0 GB (powers of 1024)."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KB", "MB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def display_text(data: bytes, *, complete: bool = True) -> str:
    """`data` as text safe to put on a terminal: invalid UTF-8 as U+FFFD, control bytes as
    their visible symbols (␀, ␛…), never an escape sequence.

    With `complete=False` (a line cut at the cap) a multi-byte character split by the cut
    is left out instead of shown as garbage.
    """
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(data, final=complete)
    return visible(text)
