"""The rolling output buffer: tool output cut to head + tail at the source (SPEC §3, seed 000 §8.2).

The seed's Go buffer splits every write into strings and re-slices the whole list;
this one works on bytes, counts newlines with `bytes.count` and only materialises
lines it can keep. A block whose own lines refill the tail window is held as is and
split only if no later block supersedes it, so a flood costs a few C-level scans per
chunk. Memory stays O(max_lines) — also for one giant line, whose kept part is capped
at `max_line_bytes`.

Unlike the seed, nothing is lost: with a `spill_path` the full raw byte stream is
teed to disk as it arrives.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path
from typing import BinaryIO, NamedTuple

CHUNK_SIZE = 64 * 1024
# Writes bigger than the buffer go straight to the file; small ones are coalesced.
SPILL_BUFFER = 32 * 1024

# A single write bigger than this is scanned line by line so a caller writing one huge
# block with huge lines in its tail never makes us copy more than we keep.
_SPLIT_LIMIT = 4 * 1024 * 1024
# A block whose lines refill the whole tail is kept as is and split only when needed; in a
# flood most blocks are superseded by the next one and never split at all.
_PENDING_MAX = 1024 * 1024

KEEP_SPILL_TRUNCATED = "truncated"
KEEP_SPILL_ALWAYS = "always"


class _CutLine(NamedTuple):
    """A kept line whose bytes were capped; `size` is the full length of the line."""

    kept: bytes
    size: int


def head_size_for(max_lines: int) -> int:
    return min(max(max_lines // 5, 50), max_lines)


def truncation_marker(dropped: int) -> str:
    return f"... [{dropped} lines truncated for context efficiency] ..."


def whole_chars(data: bytes | bytearray) -> bytes:
    """`data` without a UTF-8 sequence left incomplete at its end by a cut."""
    n = len(data)
    for back in range(1, min(4, n) + 1):
        byte = data[n - back]
        if byte & 0xC0 != 0x80:
            if byte >= 0xC0 and (2 if byte < 0xE0 else 3 if byte < 0xF0 else 4) > back:
                return bytes(data[:n - back])
            break
    return bytes(data)


def display_line(kept: bytes | bytearray, size: int) -> str:
    """One line as the model sees it: decoded leniently, a trailing CR dropped, a cut marked.

    `kept` is the start of the line (a cut must already be on a character boundary,
    see `whole_chars`); `size` is the full length of the line in bytes.
    """
    if size > len(kept):
        return f"{bytes(kept).decode('utf-8', 'replace')}… [line cut: {size - len(kept)} more bytes]"
    if kept.endswith(b"\r"):
        kept = kept[:-1]
    return bytes(kept).decode("utf-8", "replace")


def _decode(line: bytes | _CutLine) -> str:
    if isinstance(line, _CutLine):
        return display_line(line.kept, line.size)
    return display_line(line, len(line))


class RollingOutputBuffer:
    """A thread-safe writer that keeps the first `head` and the last `max_lines - head` lines.

    Use it as a sink: `write()` bytes or text as they arrive (or `pump()` a pipe into it),
    then `close()`. `render()` gives what the model sees. With `spill_path`, the whole raw
    stream is written there byte for byte; on close the file is deleted unless something
    was dropped or cut (`keep_spill="truncated"`, the default) or `keep_spill="always"`.
    """

    def __init__(self, max_lines: int, max_line_bytes: int = 4000, spill_path: str | os.PathLike | None = None,
                 keep_spill: str = KEEP_SPILL_TRUNCATED):
        if max_lines < 1:
            raise ValueError("max_lines must be at least 1")
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        if keep_spill not in (KEEP_SPILL_TRUNCATED, KEEP_SPILL_ALWAYS):
            raise ValueError(f"keep_spill must be {KEEP_SPILL_TRUNCATED!r} or {KEEP_SPILL_ALWAYS!r}")
        self.max_lines = max_lines
        self.max_line_bytes = max_line_bytes
        self.head_size = head_size_for(max_lines)
        self.tail_size = max_lines - self.head_size
        self.keep_spill = keep_spill
        self._lock = threading.Lock()
        self._head: list[bytes | _CutLine] = []
        self._tail: deque[bytes | _CutLine] = deque(maxlen=self.tail_size)
        self._head_cut = 0
        self._tail_cut = 0
        self._pending: tuple[bytes, int, int, int] | None = None
        self._complete = 0            # lines ended by a newline
        self._partial = bytearray()   # start of the unfinished line, at most max_line_bytes
        self._partial_size = 0        # its full length so far
        self._total_bytes = 0
        self._closed = False
        self._spill_path = Path(spill_path) if spill_path is not None else None
        self._spill: BinaryIO | None = None
        self._spill_kept = False
        if self._spill_path is not None:
            # O_NOFOLLOW: a symlink planted at the spill path must not redirect our write.
            fd = os.open(self._spill_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            self._spill = os.fdopen(fd, "wb", buffering=SPILL_BUFFER)

    # -- writing ---------------------------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview | str) -> int:
        """Take a piece of the stream; returns its length, like a file."""
        if isinstance(data, str):
            try:
                raw = data.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                raw = data.encode("utf-8", "replace")
            n = len(data)
        else:
            raw = bytes(data) if not isinstance(data, bytes) else data
            n = len(raw)
        if not raw:
            return n
        with self._lock:
            if self._closed:
                raise ValueError("write to a closed RollingOutputBuffer")
            if self._spill is not None:
                self._spill.write(raw)
            self._total_bytes += len(raw)
            self._ingest(raw)
        return n

    def pump(self, source: BinaryIO | int, chunk_size: int = CHUNK_SIZE) -> int:
        """Copy a binary file object or file descriptor into the buffer until EOF; returns bytes read."""
        fd = source if isinstance(source, int) else None
        read = getattr(source, "read1", None) or getattr(source, "read", None)
        total = 0
        while True:
            chunk = os.read(fd, chunk_size) if fd is not None else read(chunk_size)
            if not chunk:
                return total
            total += len(chunk)
            self.write(chunk)

    def flush(self) -> None:
        with self._lock:
            if self._spill is not None:
                self._spill.flush()

    def close(self) -> None:
        """End the stream: the unfinished last line counts as a line; the spill is kept or removed."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._partial_size:
                self._finish_partial()
            self._settle()
            if self._spill is not None:
                self._spill.close()
                self._spill = None
                keep = self.keep_spill == KEEP_SPILL_ALWAYS or self._dropped() > 0 or self._cut() > 0
                if keep:
                    self._spill_kept = True
                else:
                    try:
                        os.unlink(self._spill_path)
                    except FileNotFoundError:
                        pass

    def __enter__(self) -> "RollingOutputBuffer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- the hot path (called with the lock held) ------------------------------------------------
    def _ingest(self, data: bytes) -> None:
        newlines = data.count(b"\n")
        if not newlines:
            self._extend_partial(data, 0, len(data))
            return
        first = data.find(b"\n")
        last = data.rfind(b"\n") if newlines > 1 else first
        inner = newlines - 1          # complete lines between the first and the last newline
        if len(self._head) >= self.head_size and inner >= self.tail_size:
            # This block alone refills the tail window: the line it completes and the
            # current tail are pushed out unseen, so never materialise them.
            self._complete += 1
            self._partial.clear()
            self._partial_size = 0
            self._clear_tail()
        else:
            self._extend_partial(data, 0, first)
            self._finish_partial()
        self._complete += inner
        start = first + 1
        while inner and len(self._head) < self.head_size:
            end = data.find(b"\n", start)
            self._keep_head(self._capped(data, start, end))
            start = end + 1
            inner -= 1
        if inner and self.tail_size:
            if inner >= self.tail_size:
                self._clear_tail()
                if len(data) <= _PENDING_MAX:
                    self._pending = (data, start, last, inner)
                else:
                    self._tail_cut = self._extend_tail_from(data, start, last, inner, self.tail_size)
            else:
                self._settle()
                self._make_room(inner)
                self._tail_cut += self._extend_tail_from(data, start, last, inner, inner)
        self._extend_partial(data, last + 1, len(data))

    def _clear_tail(self) -> None:
        self._tail.clear()
        self._tail_cut = 0
        self._pending = None

    def _settle(self) -> None:
        """Split the pending block into the tail window (it holds at least `tail_size` lines)."""
        if self._pending is not None:
            data, start, end, count = self._pending
            self._pending = None
            self._tail.clear()
            self._tail_cut = self._extend_tail_from(data, start, end, count, self.tail_size)

    def _extend_tail_from(self, data: bytes, start: int, end: int, count: int, take: int) -> int:
        """Append the last `take` of the `count` lines in data[start:end] to the tail; returns how many were cut."""
        seg = start
        if take < count:
            seg = end
            for _ in range(take):
                seg = data.rfind(b"\n", start, seg)
            seg += 1
        limit = self.max_line_bytes
        if end - seg <= limit:
            self._tail.extend(data[seg:end].split(b"\n"))
            return 0
        if end - seg <= _SPLIT_LIMIT:
            lines = [line if len(line) <= limit else self._cut_line(line, len(line))
                     for line in data[seg:end].split(b"\n")]
        else:
            lines = []
            for _ in range(take):
                stop = data.find(b"\n", seg)
                lines.append(self._capped(data, seg, stop))
                seg = stop + 1
        self._tail.extend(lines)
        return sum(1 for line in lines if isinstance(line, _CutLine))

    def _make_room(self, n: int) -> None:
        """Account for the cut lines about to fall off the front of the tail window."""
        overflow = len(self._tail) + n - self.tail_size
        if self._tail_cut and overflow > 0:
            if overflow >= len(self._tail):
                self._tail_cut = 0
            else:
                self._tail_cut -= sum(1 for i in range(overflow) if isinstance(self._tail[i], _CutLine))

    def _extend_partial(self, data: bytes, start: int, end: int) -> None:
        if end <= start:
            return
        room = self.max_line_bytes - len(self._partial)
        if room > 0:
            self._partial += data[start:min(end, start + room)]
        self._partial_size += end - start

    def _finish_partial(self) -> None:
        """The unfinished line is complete: keep it in the head or the tail."""
        self._complete += 1
        if self._partial_size > self.max_line_bytes:
            line = self._cut_line(self._partial, self._partial_size)
        else:
            line = bytes(self._partial)
        self._partial.clear()
        self._partial_size = 0
        if len(self._head) < self.head_size:
            self._keep_head(line)
        elif self.tail_size:
            self._settle()
            self._make_room(1)
            self._tail.append(line)
            self._tail_cut += isinstance(line, _CutLine)

    def _capped(self, data: bytes, start: int, end: int) -> bytes | _CutLine:
        if end - start <= self.max_line_bytes:
            return data[start:end]
        return self._cut_line(data[start:start + self.max_line_bytes], end - start)

    def _cut_line(self, prefix: bytes | bytearray, size: int) -> _CutLine:
        # Half a UTF-8 character at the cut would show up as a replacement mark.
        return _CutLine(whole_chars(prefix[:self.max_line_bytes]), size)

    def _keep_head(self, line: bytes | _CutLine) -> None:
        self._head.append(line)
        if isinstance(line, _CutLine):
            self._head_cut += 1

    def _dropped(self) -> int:
        shown = self.tail_size if self._pending is not None else len(self._tail)
        return self._complete - len(self._head) - shown

    def _cut(self) -> int:
        return self._head_cut + self._tail_cut

    # -- reading ---------------------------------------------------------------------------------
    def _snapshot(self) -> tuple[list, list, int, int, int]:
        """(head, tail, dropped, total lines, cut lines) as if the stream ended now."""
        self._settle()
        head = list(self._head)
        tail = list(self._tail)
        dropped = self._dropped()
        total = self._complete
        cut = self._cut()
        if self._partial_size:
            total += 1
            if self._partial_size > self.max_line_bytes:
                line = self._cut_line(self._partial, self._partial_size)
                cut += 1
            else:
                line = bytes(self._partial)
            if len(head) < self.head_size:
                head.append(line)
            elif self.tail_size:
                tail.append(line)
                if len(tail) > self.tail_size:
                    gone = tail.pop(0)
                    cut -= isinstance(gone, _CutLine)
                    dropped += 1
            else:
                cut -= isinstance(line, _CutLine)
                dropped += 1
        return head, tail, dropped, total, cut

    def render(self) -> str:
        """What the model sees: head, the truncation marker if lines were dropped, tail."""
        with self._lock:
            head, tail, dropped, _, _ = self._snapshot()
        parts = "\n".join(_decode(x) for x in head)
        if dropped:
            parts += ("\n\n" if head else "") + truncation_marker(dropped)
            if tail:
                parts += "\n\n"
        elif head and tail:
            parts += "\n"
        return parts + "\n".join(_decode(x) for x in tail)

    __str__ = render

    @property
    def total_lines(self) -> int:
        with self._lock:
            return self._complete + (1 if self._partial_size else 0)

    @property
    def dropped_lines(self) -> int:
        with self._lock:
            return self._snapshot()[2]

    @property
    def cut_lines(self) -> int:
        """Lines shown shortened to `max_line_bytes` (dropped lines are counted as dropped)."""
        with self._lock:
            return self._snapshot()[4]

    @property
    def total_bytes(self) -> int:
        with self._lock:
            return self._total_bytes

    @property
    def truncated(self) -> bool:
        return self.dropped_lines > 0 or self.cut_lines > 0

    @property
    def spill_path(self) -> Path | None:
        """The spill file, while streaming and after close if it was kept; None otherwise."""
        with self._lock:
            if self._spill_path is None or (self._closed and not self._spill_kept):
                return None
            return self._spill_path
