"""The rolling output buffer: tool output cut to head + tail at the source (SPEC §3, seed 000 §8.2).

The seed's Go buffer splits every write into strings and re-slices the whole list;
this one works on bytes, counts newlines with `bytes.count` and only materialises
lines it can keep. A block whose own lines refill the tail window is held as is and
split only if no later block supersedes it, so a flood costs a few C-level scans per
chunk. Memory stays O(max_lines) — also for one giant line, whose kept part is capped
at `max_line_bytes`.

Unlike the seed, nothing is lost: with a spill file the full raw byte stream is
teed to disk as it arrives. With `max_bytes` the shown head and tail together also
stay within a byte budget (SPEC §3): 400 lines of 3 KB never reach the model whole.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from pathlib import Path
from typing import BinaryIO, NamedTuple

from breakwater.tools.spill import SNIFF, Spill, looks_binary

CHUNK_SIZE = 64 * 1024
# Writes bigger than the buffer go straight to the file; small ones are coalesced.
SPILL_BUFFER = 32 * 1024

# A single write bigger than this is scanned line by line so a caller writing one huge
# block with huge lines in its tail never makes us copy more than we keep.
_SPLIT_LIMIT = 4 * 1024 * 1024
# A block whose lines refill the whole tail is kept as is and split only when needed; in a
# flood most blocks are superseded by the next one and never split at all.
_PENDING_MAX = 1024 * 1024

# The budget of shown text must leave room for the truncation marker and a cut line's note.
_MARKER_ROOM = 64
MIN_MAX_BYTES = 4 * _MARKER_ROOM

KEEP_SPILL_TRUNCATED = "truncated"
KEEP_SPILL_ALWAYS = "always"


class _CutLine(NamedTuple):
    """A kept line whose bytes were capped; `size` is the full length of the line."""

    kept: bytes
    size: int


class _Shown(NamedTuple):
    """What the model is shown: head and tail lines as text, and the counts around them."""

    head: list[str]
    tail: list[str]
    dropped: int
    total: int
    cut: int


def _fitting(sizes: list[int], room: int) -> int:
    """How many of `sizes`, from the first, fit in `room` together."""
    used = 0
    for i, size in enumerate(sizes):
        used += size
        if used > room:
            return i
    return len(sizes)


def head_size_for(max_lines: int) -> int:
    return min(max(max_lines // 5, 50), max_lines)


def truncation_marker(dropped: int) -> str:
    return f"... [{dropped} line{'' if dropped == 1 else 's'} truncated for context efficiency] ..."


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
    then `close()`. `render()` gives what the model sees. With `spill_path` (created
    exclusively) or a `Spill` from `Spill.create_in`, the whole raw
    stream is written there byte for byte; on close the file is deleted unless something
    was dropped or cut (`keep_spill="truncated"`, the default) or `keep_spill="always"`.
    """

    def __init__(self, max_lines: int, max_line_bytes: int = 4000, spill_path: str | os.PathLike | None = None,
                 keep_spill: str = KEEP_SPILL_TRUNCATED, *, max_bytes: int | None = None, spill: Spill | None = None,
                 max_spill_bytes: int | None = None, spill_bound: str = "tool_max_spill_mb"):
        if max_lines < 1:
            raise ValueError("max_lines must be at least 1")
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be at least 1")
        if max_bytes is not None and max_bytes < MIN_MAX_BYTES:
            raise ValueError(f"max_bytes must be at least {MIN_MAX_BYTES}")
        if spill is not None and spill_path is not None:
            raise ValueError("give spill or spill_path, not both")
        if keep_spill not in (KEEP_SPILL_TRUNCATED, KEEP_SPILL_ALWAYS):
            raise ValueError(f"keep_spill must be {KEEP_SPILL_TRUNCATED!r} or {KEEP_SPILL_ALWAYS!r}")
        self.max_lines = max_lines
        self.max_line_bytes = max_line_bytes
        self.head_size = head_size_for(max_lines)
        self.tail_size = max_lines - self.head_size
        self.keep_spill = keep_spill
        self.max_bytes = max_bytes
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
        self._sniff = b""             # the first SNIFF bytes: they decide whether the output is binary
        self._closed = False
        self._final: _Shown | None = None
        # Created exclusively: whatever is planted at the path (a symlink, a hard link) is refused.
        self._spill_file = Spill.create_at(spill_path) if spill_path is not None else spill
        self._spill: BinaryIO | None = None
        self._spill_kept = False
        # the spill keeps at most this much of the stream (a command could fill the disk through it);
        # `spill_stopped` says why it holds less than the whole stream: the bound, or a write that failed
        self.max_spill_bytes = max_spill_bytes
        self.spill_bound = spill_bound      # what `max_spill_bytes` is, for the notice
        self.spill_stopped: str | None = None
        self._spilled = 0
        if self._spill_file is not None:
            self._spill = self._spill_file.open_writer(SPILL_BUFFER)

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
            if self._spill is not None and self.spill_stopped is None:
                self._to_spill(raw)
            if self._total_bytes < SNIFF:
                self._sniff += raw[:SNIFF - self._total_bytes]
            self._total_bytes += len(raw)
            self._ingest(raw)
        return n

    def _to_spill(self, raw: bytes) -> None:
        if self.max_spill_bytes is not None and self._spilled + len(raw) > self.max_spill_bytes:
            raw = raw[:self.max_spill_bytes - self._spilled]
            self.spill_stopped = f"it holds the first {self.max_spill_bytes:,} bytes only ({self.spill_bound})"
        try:
            self._spill.write(raw)
        except OSError as exc:
            self.spill_stopped = f"it holds only the first {self._spilled:,} bytes: {exc.strerror or exc}"
            return
        self._spilled += len(raw)

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
            if self._spill is not None and self.spill_stopped is None:
                try:
                    self._spill.flush()
                except OSError as exc:
                    self.spill_stopped = f"it holds only the first {self._spilled:,} bytes: {exc.strerror or exc}"

    def close(self) -> None:
        """End the stream: the unfinished last line counts as a line; the spill is kept or removed."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._partial_size:
                self._finish_partial()
            self._final = self._snapshot()
            if self._spill is not None:
                if self.keep_spill == KEEP_SPILL_ALWAYS or self._final.dropped or self._final.cut:
                    self._spill_kept = True
                else:
                    self._spill_file.discard()      # while our descriptor still pins the inode
                try:
                    self._spill.close()             # the buffered tail is written here
                except OSError as exc:
                    self.spill_stopped = self.spill_stopped or f"its end is missing: {exc.strerror or exc}"
                self._spill = None
                self._spill_file.close()

    @property
    def spilled_bytes(self) -> int:
        """What the spill file holds (0 once it was removed: nothing was truncated)."""
        return self._spilled if self._spill_kept or not self._closed else 0

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
    def _snapshot(self) -> "_Shown":
        """What would be shown if the stream ended now, within the line and byte caps."""
        if self._final is not None:
            return self._final
        return self._fit(*self._lines())

    def _lines(self) -> tuple[list, list, int, int, int]:
        """(head, tail, dropped, total lines, cut lines) by the line caps, as if the stream ended now."""
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

    def _fit(self, head: list, tail: list, dropped: int, total: int, cut: int) -> "_Shown":
        """Keep the shown head and tail within `max_bytes` of text (the marker's room included).

        The head gets its share of the budget (as many bytes per line as the tail) or
        whatever the tail leaves; lines that do not fit join the dropped middle. A single
        line too big for what is left is cut to fit, so something of each end is shown.
        """
        heads = [_decode(x) for x in head]
        tails = [_decode(x) for x in tail]
        if self.max_bytes is None:
            return _Shown(heads, tails, dropped, total, cut)
        hsz = [len(t.encode("utf-8", "surrogatepass")) + 1 for t in heads]
        tsz = [len(t.encode("utf-8", "surrogatepass")) + 1 for t in tails]
        if sum(hsz) + sum(tsz) + (_MARKER_ROOM if dropped else 0) <= self.max_bytes:
            return _Shown(heads, tails, dropped, total, cut)
        budget = self.max_bytes - _MARKER_ROOM
        head_room = max(budget * self.head_size // self.max_lines, budget - sum(tsz))
        h = _fitting(hsz, head_room)
        if h == 0 and heads:
            heads[0], grew = self._shrink(head[0], head_room)
            cut += grew
            hsz[0] = len(heads[0].encode("utf-8", "surrogatepass")) + 1
            h = 1
        tail_room = budget - sum(hsz[:h])
        t = _fitting(tsz[::-1], tail_room)
        if t == 0 and tails and tail_room > _MARKER_ROOM:
            tails[-1], grew = self._shrink(tail[-1], tail_room)
            cut += grew
            t = 1
        gone = head[h:] + tail[:len(tail) - t]
        cut -= sum(1 for line in gone if isinstance(line, _CutLine))
        return _Shown(heads[:h], tails[len(tails) - t:], dropped + len(gone), total, cut)

    def _shrink(self, line: bytes | _CutLine, room: int) -> tuple[str, int]:
        """`line` cut to about `room` bytes of text; (its text, 1 if it was not cut before)."""
        raw, size = (line.kept, line.size) if isinstance(line, _CutLine) else (line, len(line))
        keep = max(0, room - _MARKER_ROOM)
        for _ in range(4):     # invalid UTF-8 grows threefold when decoded: shrink until it fits
            text = display_line(whole_chars(raw[:keep]), size)
            over = len(text.encode("utf-8", "surrogatepass")) + 1 - room
            if over <= 0 or keep == 0:
                break
            keep = max(0, keep - over)
        return text, 0 if isinstance(line, _CutLine) else 1

    def render(self) -> str:
        """What the model sees: head, the truncation marker if lines were dropped, tail."""
        with self._lock:
            shown = self._snapshot()
        head, tail, dropped = shown.head, shown.tail, shown.dropped
        parts = "\n".join(head)
        if dropped:
            parts += ("\n\n" if head else "") + truncation_marker(dropped)
            if tail:
                parts += "\n\n"
        elif head and tail:
            parts += "\n"
        return parts + "\n".join(tail)

    __str__ = render

    @property
    def total_lines(self) -> int:
        with self._lock:
            return self._complete + (1 if self._partial_size else 0)

    @property
    def dropped_lines(self) -> int:
        with self._lock:
            return self._snapshot().dropped

    @property
    def shown_head_lines(self) -> int:
        """How many lines of the start are shown: the dropped lines begin after them."""
        with self._lock:
            return len(self._snapshot().head)

    @property
    def binary(self) -> bool:
        """Whether the output looks binary by read_file's rule (a NUL byte near the start)."""
        with self._lock:
            return looks_binary(self._sniff)

    @property
    def cut_lines(self) -> int:
        """Lines shown shortened to `max_line_bytes` (dropped lines are counted as dropped)."""
        with self._lock:
            return self._snapshot().cut

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
            if self._spill_file is None or (self._closed and not self._spill_kept):
                return None
            return self._spill_file.path
