"""read_file: a slice of a file for the model, never the whole flood (SPEC §3).

The file is streamed in chunks: chunks before the range and after it are only
counted with `bytes.count`, so a multi-gigabyte log costs one fast scan and the
memory of the lines shown. Line numbers are 1-based and match `seq`/`sed -n`,
and the spill files' notices.
"""

from __future__ import annotations

import os
import stat

from breakwater.tools.result import ToolResult, error_result
from breakwater.tools.rolling_buffer import display_line, whole_chars
from breakwater.tools.spill import (DEFAULT_HEX_BYTES, MAX_HEX_BYTES, SNIFF, hex_range_hint, looks_binary,
                                   read_range_hint)
from breakwater.tools.workspace import Workspace, WorkspaceError, as_workspace

DEFAULT_MAX_LINES = 400
CHUNK = 256 * 1024


def read_file(workspace: Workspace | str | os.PathLike, path: str, start_line: int | None = None,
              end_line: int | None = None, max_lines: int = DEFAULT_MAX_LINES,
              max_line_bytes: int = 4000, *, offset: int | None = None, length: int | None = None,
              max_hex_bytes: int = MAX_HEX_BYTES) -> ToolResult:
    """Lines `start_line`..`end_line` (inclusive) of `path`, at most `max_lines` of them.

    The text starts with a header `[path: lines a-b of N]`; when lines remain after
    the slice it ends with how many and the call that reads the next slice. A binary
    file (or any file when `offset`/`length` are given) is shown as a hex dump of
    `length` bytes from byte `offset` instead.
    """
    start = 1 if start_line is None else start_line
    if start < 1:
        return error_result("read_file", f"start_line must be 1 or more, got {start}", path=str(path))
    if end_line is not None and end_line < start:
        return error_result("read_file", f"end_line {end_line} is before start_line {start}", path=str(path))
    if max_lines < 1:
        return error_result("read_file", "max_lines must be 1 or more", path=str(path))
    if offset is not None and offset < 0 or length is not None and length < 1:
        return error_result("read_file", "offset must be 0 or more and length 1 or more", path=str(path))
    try:
        ws = as_workspace(workspace)
        rel = ws.rel(path)
        # Non-blocking, so a FIFO planted at the path cannot hang the call; it is refused below.
        fd = ws.open(rel, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except WorkspaceError as exc:
        return error_result("read_file", str(exc), path=str(path))
    except FileNotFoundError:
        return error_result("read_file", f"no such file: {rel}", path=rel)
    except NotADirectoryError:
        return error_result("read_file", f"a parent of {rel} is not a directory", path=rel)
    except PermissionError:
        return error_result("read_file", f"permission denied: {rel}", path=rel)
    except OSError as exc:
        return error_result("read_file", f"cannot read {rel}: {exc.strerror or exc}", path=rel)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        what = "a directory, not a file" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        return error_result("read_file", f"{rel} is {what}", path=rel)
    size = info.st_size
    with os.fdopen(fd, "rb") as fh:
        try:
            if offset is not None or length is not None or looks_binary(fh.read(SNIFF)):
                lines_asked = start_line is not None or end_line is not None
                return _hex_view(fh, rel, size, offset or 0, min(length or DEFAULT_HEX_BYTES, max_hex_bytes),
                                 lines_asked and offset is None and length is None)
            fh.seek(0)
            wanted_end = start + max_lines - 1 if end_line is None else min(end_line, start + max_lines - 1)
            lines, total, cut = _scan(fh, start, wanted_end, max_line_bytes)
        except OSError as exc:
            return error_result("read_file", f"cannot read {rel}: {exc.strerror or exc}", path=rel)
    meta = {"path": rel, "total_lines": total, "bytes": size, "cut_lines": cut}
    if total == 0:
        return ToolResult(f"[{rel}: empty file]",
                          {"tool": "read_file", **meta, "start_line": 0, "end_line": 0, "capped": False})
    if start > total:
        return error_result("read_file", f"start_line {start} is past the end of {rel} ({total} lines)", **meta)
    last = start + len(lines) - 1
    capped = (end_line is None or end_line > last) and last < total
    out = [f"[{rel}: lines {start}-{last} of {total}]", *lines]
    if last < total:
        cap = f"capped at {max_lines} lines per call; " if end_line is not None and end_line > last else ""
        out.append(f"[{cap}{total - last} more lines after line {last}; next: "
                   f"{read_range_hint(rel, last + 1, min(total, last + max_lines))}]")
    return ToolResult("\n".join(out),
                      {"tool": "read_file", **meta, "start_line": start, "end_line": last, "capped": capped})


def _hex_view(fh, rel: str, size: int, offset: int, length: int, lines_ignored: bool = False) -> ToolResult:
    """`length` bytes from `offset` as `hexdump -C` shows them: offset, 16 bytes in hex, the printable ones."""
    meta = {"path": rel, "binary": True, "bytes": size}
    if size == 0:
        return ToolResult(f"[{rel}: empty file]", {"tool": "read_file", **meta, "offset": 0, "length": 0})
    if offset >= size:
        return error_result("read_file", f"offset {offset} is past the end of {rel} ({size} bytes)", **meta)
    fh.seek(offset)
    data = fh.read(length)
    end = offset + len(data)
    why = "; a binary file has no lines to slice, use offset and length" if lines_ignored else ""
    out = [f"[{rel}: binary file, {size} bytes; bytes {offset}-{end - 1} as hex{why}]"]
    for at in range(0, len(data), 16):
        row = data[at:at + 16]
        cells = " ".join(f"{b:02x}" for b in row[:8]) + "  " + " ".join(f"{b:02x}" for b in row[8:])
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        out.append(f"{offset + at:08x}  {cells:<48}  |{text}|")
    if end < size:
        out.append(f"[{size - end} more bytes after byte {end - 1}; next: {hex_range_hint(rel, end, length)}]")
    return ToolResult("\n".join(out), {"tool": "read_file", **meta, "offset": offset, "length": len(data)})


def _scan(fh, start: int, end: int, max_line_bytes: int) -> tuple[list[str], int, int]:
    """(lines start..end as text, total line count, how many shown lines were cut)."""
    lines: list[str] = []
    cut = 0
    line_no = 1                 # the line the read position is in
    current = bytearray()       # the start of the line being collected, at most max_line_bytes
    current_size = 0
    last_byte = b""
    while chunk := fh.read(CHUNK):
        last_byte = chunk[-1:]
        newlines = chunk.count(b"\n")
        if line_no > end or line_no + newlines < start:
            line_no += newlines
            continue
        pos = 0
        while True:
            nl = chunk.find(b"\n", pos)
            stop = len(chunk) if nl < 0 else nl
            if start <= line_no <= end:
                room = max_line_bytes - len(current)
                if room > 0:
                    current += chunk[pos:min(stop, pos + room)]
                current_size += stop - pos
            if nl < 0:
                break
            if start <= line_no <= end:
                cut += current_size > max_line_bytes
                lines.append(_text(current, current_size, max_line_bytes))
                current.clear()
                current_size = 0
            line_no += 1
            pos = nl + 1
            if line_no > end:
                line_no += chunk.count(b"\n", pos)
                break
    total = line_no if last_byte not in (b"", b"\n") else line_no - 1
    if last_byte not in (b"", b"\n") and start <= line_no <= end:
        cut += current_size > max_line_bytes
        lines.append(_text(current, current_size, max_line_bytes))
    return lines, total, cut


def _text(current: bytearray, size: int, max_line_bytes: int) -> str:
    kept = whole_chars(current) if size > max_line_bytes else current
    return display_line(kept, size)
