"""The append-only session log (native JSONL).

Line types:
  {"type": "session", "id", "version", "created", "model", "window", ...}   header, first line
  {"type": "message", "id", "turn", "role", "content", "tool_calls"?, "tool_call_id"?, "meta"?}
  {"type": <event>, "id", ...}  a stateful decision; see `EVENT_TYPES`

Raw messages are never rewritten: compaction shapes the view sent to the
model, it never edits this file.
"""

from __future__ import annotations

import errno
import gc
import itertools
import json
import os
import re
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import repeat
from pathlib import Path
from typing import Any, Iterable, Mapping

import msgspec

from breakwater.core.log.beneath import OwnedDir, replace_beneath
from breakwater.core.log.json_lines import (SessionLogError, open_session_file, read_line,
                                        replace_surrogates_in, shallow)
from breakwater.core.log.message import MAX_TURN, ROLES, Message, ToolCall, short_value as _short

_ROLES = {r: r for r in ROLES}   # a set that hands out one shared string per role
MAX_COUNT = 10**15  # beyond any real token, line or byte count: the field is garbage

FORMAT_VERSION = 1

# compaction: a deep compaction's summary (persisted so replay gives the same view)
# trigger:    a manual request to run a stage from here on (snip|mask|microcompact|deep_compact)
# undo:       cancels the event named by `target`
# pin/unpin:  a message that no stage may compact
# usage:      what the API reported for a request (feeds calibration)
# config:     a policy change made during the session
# error:      a failed model call or tool, recorded so the log stays truthful
# note:       anything else worth showing on the timeline
EVENT_TYPES = ("compaction", "trigger", "undo", "pin", "unpin", "usage", "config", "error", "note")


class LogWriteError(OSError):
    """A line of the session log could not be written whole; the log still ends with a whole line."""


@dataclass(frozen=True, slots=True)
class Event:
    type: str
    id: str
    data: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    def to_record(self) -> dict[str, Any]:
        rec = {"type": self.type, "id": self.id}
        rec.update({k: v for k, v in self.data.items() if k not in ("type", "id")})
        return rec

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], fallback_id: str) -> "Event":
        data = {k: v for k, v in rec.items() if k not in ("type", "id")}
        return cls(type=str(rec["type"]), id=str(rec.get("id") or fallback_id), data=data)


Entry = Message | Event


@dataclass(frozen=True, slots=True)
class LoadIssue:
    """A line that could not be loaded as it was; reported, never fatal."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


def new_session_id() -> str:
    return uuid.uuid4().hex


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


_SURROGATES = re.compile("[\ud800-\udfff]")


class SessionLog:
    """An ordered list of messages and events, optionally backed by a file we append to."""

    def __init__(self, header: Mapping[str, Any] | None = None, entries: Iterable[Entry] = (),
                 path: Path | None = None, issues: Iterable[LoadIssue] = (), source_format: str = "native"):
        self.header: dict[str, Any] = dict(header or {})
        self.entries: list[Entry] = list(entries)
        self.path = path
        self.issues: list[LoadIssue] = list(issues)
        self.source_format = source_format
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._dir: OwnedDir | None = None
        self._mark: tuple[int, int, int, int] | None = None     # the file as our last write left it
        self._n_messages = sum(map(isinstance, self.entries, repeat(Message)))   # a million: no generator
        self._n_events = len(self.entries) - self._n_messages

    # -- reading -------------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return str(self.header.get("id") or (self.path.stem if self.path else "session"))

    @property
    def messages(self) -> list[Message]:
        return [e for e in self.entries if isinstance(e, Message)]

    @property
    def events(self) -> list[Event]:
        return [e for e in self.entries if isinstance(e, Event)]

    def turn_count(self) -> int:
        return sum(1 for e in self.entries if isinstance(e, Message) and e.role == "assistant")

    # -- writing -------------------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, header: Mapping[str, Any], anchor: Path | None = None) -> "SessionLog":
        """A new log file at `path`, created exclusively. The folders between `anchor` (default: the
        file's own folder) and the file are reached with no symlink followed, as the workspace's
        tools may have planted one (issue 27); they are made when missing."""
        path = Path(path)
        anchor = path.parent if anchor is None else Path(anchor)
        head = {"type": "session", "version": FORMAT_VERSION, "id": new_session_id(), "created": utc_now()}
        head.update(header)
        log = cls(header=head, path=path)
        log._dir = OwnedDir(anchor, os.path.relpath(path.parent, anchor))
        log._fd = log._dir.open(path.name, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND)
        log._write(json.dumps(head, ensure_ascii=False) + "\n")
        return log

    def append(self, entry: Entry) -> Entry:
        """Append one entry; written before returning when file-backed. Returns the entry as logged:
        a lone surrogate (unencodable) in any of its texts becomes U+FFFD.

        LogWriteError when the line cannot be written whole (a full disk): the file is cut back to
        the end of the line before, and the entry is not kept."""
        record = entry.to_record()
        line = json.dumps(record, ensure_ascii=False) + "\n"
        if not line.isascii() and _SURROGATES.search(line):
            record = replace_surrogates_in(record)
            entry = (Message.from_record(record) if isinstance(entry, Message)
                     else Event.from_record(record, entry.id))
            line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            if self.path is not None:
                if self._fd is None:
                    self._dir = self._dir or OwnedDir(self.path.parent)
                    self._fd = self._dir.open(self.path.name, os.O_RDWR | os.O_APPEND)
                self._write(line)
            self.entries.append(entry)
            if isinstance(entry, Message):
                self._n_messages += 1
            else:
                self._n_events += 1
        return entry

    def _write(self, line: str) -> None:
        """The whole line or nothing (beneath.append_whole): a write cut short (ENOSPC, EFBIG) is taken
        back; a torn line found at the end (written by something else) is set aside, never extended."""
        try:
            aside = self._dir.append_to(self._fd, self.path.name, line.encode("utf-8"))
        except OSError as exc:
            raise LogWriteError(exc.errno, f"cannot write to the session log {self.path}: "
                                           f"{'the disk is full' if exc.errno in (errno.ENOSPC, errno.EDQUOT) else exc}"
                                ) from None
        if aside is not None:
            self.issues.append(LoadIssue(str(self.path), 0, str(aside)))
        self._mark = _identity(os.fstat(self._fd))

    def restore_if_changed(self) -> str | None:
        """Put the file back as this log wrote it if something else changed it since our last
        write (a command run without a sandbox can: issue 27 item 8), and say what was found;
        None when the file is as we left it (or this log has no file)."""
        with self._lock:
            if self._dir is None or self._mark is None or self.path is None:
                return None
            try:
                found = _identity(self._dir.stat(self.path.name))
            except FileNotFoundError:
                found = None
            if found == self._mark:
                return None
            what = ("was removed" if found is None else "was replaced by another file" if found[:2] != self._mark[:2]
                    else "was written to")
            data = "".join(json.dumps(rec, ensure_ascii=False) + "\n"
                           for rec in itertools.chain([self.header], (e.to_record() for e in self.entries)))
            with self._dir.fd() as d:
                replace_beneath(d, self.path.name, data.encode("utf-8"))
            os.close(self._fd)
            self._fd = self._dir.open(self.path.name, os.O_RDWR | os.O_APPEND)
            self._mark = _identity(os.fstat(self._fd))
            return f"the session log {self.path.name} {what}; it was restored from what Breakwater logged"

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def next_message_id(self) -> str:
        return f"m{self._n_messages:05d}"

    def next_event_id(self) -> str:
        return f"e{self._n_events:05d}"


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


# -- loading -----------------------------------------------------------------------------------
def load_native(path: Path) -> SessionLog:
    """Load a native session log; bad lines and fields become `issues`, the rest loads."""
    # a log is a million objects and no cycles: the collector, run every few hundred of them,
    # would walk all that were loaded so far, again and again
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load_native(Path(path))
    finally:
        if collecting:
            gc.enable()


class _Function(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    name: str = ""
    arguments: str = ""


class _Call(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    function: _Function
    id: str = ""
    type: str | None = None   # not read, as `ToolCall.from_api` does not read it


class _MessageLine(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A message line in the shape `Message.from_record` reads without a word: msgspec checks the
    types in C (a million lines: no dict to build and ask field by field). Whatever does not fit
    (a wrong type, content as parts, a flat tool call, no role) is refused and read the general way,
    and so is a field of another name: msgspec would skip it, checking its syntax but not what the
    json module then warns about (bytes that are not UTF-8, an integer too long to convert)."""

    role: str
    type: str | None = None
    id: str = ""
    turn: int | None = None
    content: str | None = ""
    tool_calls: list[_Call] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    meta: dict[str, Any] | None = None


_MESSAGES = msgspec.json.Decoder(_MessageLine)
_DECODE_MESSAGE = _MESSAGES.decode
# Read this much at a time: its whole lines are decoded in one call while they are message lines
# (a call per line, each with a fresh scratch buffer and the line copied out of the reader, cost the
# 31 MB bench session ~60 M instructions more, 6 ms; a million tiny lines 0.08 s).
BLOCK = 1 << 20
_SAMPLE, _SHORT_LINES = 4096, 8   # more lines than this in the first bytes of a block: short lines


def _load_native(path: Path) -> SessionLog:
    loader = _Loader(str(path))
    with open_session_file(path) as fh:
        loader.read(fh)
    header, entries, issues = loader.header, loader.entries, loader.issues
    if not header and not entries:
        if issues:
            raise SessionLogError(f"{path}: no loadable lines ({issues[0].reason} at line {issues[0].line})")
        raise SessionLogError(f"{path}: empty session file")
    return SessionLog(header=header, entries=entries, path=path, issues=issues)


def _line_ends(buf: bytearray, cut: int) -> tuple[int, bool]:
    """(the lines of buf[:cut], whether each starts with `{` and ends with `}`). Then a string cannot
    hold a newline, so each newline is between two values at the top level (inside an object or a
    list `}` cannot be followed by `{`): none of the lines is only part of a value."""
    find = buf.find
    single = buf[0] == 0x7B
    lines, at = 0, find(b"\n", 0, cut)
    while at >= 0:   # memchr from line to line (bytes.count is a loop over every byte, 4x slower)
        lines += 1
        single = single and buf[at - 1] == 0x7D and (at + 1 == cut or buf[at + 1] == 0x7B)
        at = find(b"\n", at + 1, cut)
    return lines, single


class _Loader:
    """What the lines of a native log have built so far. Each line is read on its own (`line`) except
    in a block of lines that are provably one message object each, decoded in one call (`messages`);
    both give the same entries, issues and line numbers."""

    def __init__(self, where: str):
        self.where = where
        self.header: dict[str, Any] = {}
        self.entries: list[Entry] = []
        self.issues: list[LoadIssue] = []
        self.n_msgs = self.n_events = self.assistants = 0

    def read(self, fh) -> None:
        first = fh.readline()   # the header, never a message line: on its own
        if not first:
            return
        self.line(1, first)
        lineno, pending, rest = self.blocks(fh, 1)
        if rest:
            pending.append(rest + fh.readline())
        # line by line from there, the rest of the last block first: the message lines decoded one at
        # a time but taken a batch at a time (a million short lines: no call for each)
        decode, items, raws = _DECODE_MESSAGE, [], []
        for raw in itertools.chain(pending, fh):
            try:
                items.append(decode(raw))
            except (ValueError, RecursionError):   # msgspec.ValidationError is a ValueError
                lineno = self.batch([], [raw], self.batch(items, raws, lineno))
                continue
            raws.append(raw)
            if len(raws) == 1024:
                lineno = self.batch(items, raws, lineno)
        self.batch(items, raws, lineno)

    def batch(self, items: list[_MessageLine], raws: list[bytes], lineno: int) -> int:
        """Take lines lineno + 1, ... (`raws`, the first of them decoded as `items`); empty both; the
        lines read. Every line not taken as a message is read by `line`, from here: the json module's
        nesting limit depends on how deep the stack is, so each meets it at the same depth, whichever
        lines are around it or whichever block it came in."""
        taken = self.take(items, lineno)
        for k in range(taken, len(raws)):
            self.line(lineno + k + 1, raws[k])
        lineno += len(raws)
        items.clear()
        raws.clear()
        return lineno

    def blocks(self, fh, lineno: int) -> tuple[int, list[bytes], bytes]:
        """Take blocks of long message lines, each decoded in one call, from line lineno + 1 on: until
        one is not all message lines or its lines are short (one call each costs little; finding them
        in Python would cost more). Returns the lines taken, the whole lines of the last block not
        taken, and the start of the line after them."""
        buf = bytearray(BLOCK)
        view = memoryview(buf)
        have = 0     # the start of buf: a line not ended yet
        while n := fh.readinto(view[have:]):
            end = have + n
            cut = buf.rfind(b"\n", have, end) + 1
            if not cut:
                if end == len(buf):   # a line longer than the buffer
                    view.release()
                    buf.extend(bytes(len(buf)))
                    view = memoryview(buf)
                have = end
                continue
            lines = taken = 0
            if buf.count(b"\n", 0, min(cut, _SAMPLE)) <= _SHORT_LINES:
                lines, single = _line_ends(buf, cut)
                taken = self.messages(view[:cut], lines, lineno) if single else 0
            if taken and taken == lines:
                lineno += lines
                have = end - cut
                view[:have] = bytes(view[cut:end])
                continue
            start = 0
            for _ in range(taken):
                start = buf.find(b"\n", start, cut) + 1
            pending = []
            while start < cut:
                nl = buf.find(b"\n", start, cut) + 1
                pending.append(bytes(view[start:nl]))
                start = nl
            return lineno + taken, pending, bytes(view[cut:end])
        return lineno, [], bytes(view[:have])

    def messages(self, block: memoryview, lines: int, lineno: int) -> int:
        """How many of `block`'s first lines were taken as messages, decoded all in one call. Each
        line starts with `{` and ends with `}` (`_line_ends`), so the one call reads one object per
        line if it reads as many objects as lines."""
        try:
            items = _MESSAGES.decode_lines(block)
        except (ValueError, RecursionError):   # not all of them fit _MessageLine: line by line
            return 0
        return self.take(items, lineno) if len(items) == lines else 0

    def take(self, items: list[_MessageLine], lineno: int) -> int:
        """How many of `items` (lines lineno + 1, ... as _MessageLine) were messages the general way
        reads without a word, taken as it takes them; the first that is not stops it."""
        append, roles = self.entries.append, _ROLES
        n_msgs, assistants = self.n_msgs, self.assistants
        taken = 0
        for line in items:
            kind, role, turn, meta = line.type, roles.get(line.role), line.turn, line.meta or None
            if not ((kind is None or kind == "message") and role is not None
                    and (turn is None or 0 <= turn <= MAX_TURN) and (meta is None or shallow(meta))):
                break
            calls = line.tool_calls
            msg = Message(line.id or f"m{n_msgs:05d}", role, line.content or "",
                          tuple([ToolCall(c.id, c.function.name, c.function.arguments) for c in calls])
                          if calls else (),
                          line.tool_call_id, line.name, assistants + 1 if turn is None else turn, meta)
            if meta is not None and type(meta.get("source")) is dict:
                problems: list[str] = []
                msg = _checked_source(msg, problems)
                if problems:
                    self.issues.append(LoadIssue(self.where, lineno + taken + 1, "; ".join(problems)))
            if role == "assistant":
                assistants += 1
            append(msg)
            n_msgs += 1
            taken += 1
        self.n_msgs, self.assistants = n_msgs, assistants
        return taken

    def line(self, lineno: int, raw: bytes) -> None:
        """Take one line: a message line by the fast path (msgspec refuses a lone surrogate escape,
        which the general way repairs and reports), anything else the general way."""
        try:
            line = _DECODE_MESSAGE(raw)
        except (ValueError, RecursionError):   # msgspec.ValidationError is a ValueError
            pass
        else:
            if self.take([line], lineno - 1):
                return
        self.general(lineno, raw)

    def general(self, lineno: int, raw: bytes) -> None:
        """Take one line the general way: whatever it holds, each problem a warning naming the line."""
        problems: list[str] = []
        for lineno, obj, problem in read_line(lineno, raw):
            if problem:
                problems.append(problem)
            if obj is None:
                pass
            elif type(obj) is not dict:
                problems.append(f"expected a JSON object, got {type(obj).__name__}, skipped")
            else:
                kind = obj.get("type")
                if kind == "message" or (kind is None and "role" in obj):
                    role = obj.get("role")
                    if type(role) is not str or not role:
                        problems.append("message without a role, skipped")
                    else:
                        if role not in _ROLES:
                            problems.append(f"role {_quoted(role)} is not a chat-completions role; "
                                            f"loaded, the pipeline drops it")
                        mid = obj.get("id")
                        msg = Message.from_record(obj, "" if type(mid) is str and mid else f"m{self.n_msgs:05d}",
                                                  problems, self.assistants + 1)
                        if msg.meta is not None and type(msg.meta.get("source")) is dict:
                            msg = _checked_source(msg, problems)
                        if role == "assistant":
                            self.assistants += 1
                        self.entries.append(msg)
                        self.n_msgs += 1
                elif kind == "session":
                    if not self.header:
                        self.header = _checked_header(obj, problems)
                elif type(kind) is str:
                    event = _checked_event(obj, f"e{self.n_events:05d}", problems)
                    if event is not None:
                        self.entries.append(event)
                        self.n_events += 1
                else:
                    problems.append("line has no \"type\", skipped")
            if problems:
                self.issues.append(LoadIssue(self.where, lineno, "; ".join(problems)))
                problems = []


def _quoted(value: str, limit: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _whole(value: Any) -> bool:
    return type(value) is int and -MAX_COUNT <= value <= MAX_COUNT


def _checked_header(obj: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """The header with the fields the core reads (model, window, preset) usable or removed."""
    bad = [k for k, ok in (("model", lambda v: type(v) is str), ("preset", lambda v: type(v) is str),
                           ("window", lambda v: _whole(v) and v > 0)) if k in obj and not ok(obj[k])]
    if not bad:
        return obj
    problems.append(f"session header: {', '.join(bad)} unusable, ignored")
    return {k: v for k, v in obj.items() if k not in bad}


# the integer fields of a tool result's `meta.source` that stages compute with
_SOURCE_COUNTS = ("total_lines", "total_bytes", "dropped_lines", "max_lines", "exit_code")
# fields of a compaction event: integers defaulted to 0 when unusable, texts required
_COMPACTION_COUNTS = ("turn", "tokens_before", "tokens_after", "covered")


def _checked_source(msg: Message, problems: list[str]) -> Message:
    source = msg.meta["source"]
    bad = [k for k in _SOURCE_COUNTS if k in source and source[k] is not None and not _whole(source[k])]
    if not bad:
        return msg
    problems.append(f"meta.source: {', '.join(bad)} not whole numbers, ignored")
    meta = {**msg.meta, "source": {k: v for k, v in source.items() if k not in bad}}
    return Message(msg.id, msg.role, msg.content, msg.tool_calls, msg.tool_call_id, msg.name, msg.turn, meta)


def _checked_event(obj: dict[str, Any], fallback_id: str, problems: list[str]) -> Event | None:
    """An event whose fields the pipeline can use; None (skipped, with the reason) if it cannot be."""
    kind = obj["type"]
    eid = obj.get("id")
    if type(eid) is not str or not eid:
        if eid not in (None, ""):
            problems.append(f"event id {_quoted(str(eid))} is not a string, read as text")
        eid = str(eid) if eid not in (None, "") else fallback_id
    data = {k: v for k, v in obj.items() if k not in ("type", "id")}
    if kind == "compaction":
        if not isinstance(data.get("summary"), str):
            problems.append("compaction without a text summary, skipped")
            return None
        if data.get("cut_id") is not None and type(data["cut_id"]) is not str:
            problems.append("compaction whose cut_id is not a message id, skipped")
            return None
        bad = [k for k in _COMPACTION_COUNTS if data.get(k) is not None and not (_whole(data[k]) and data[k] >= 0)]
        if bad:
            problems.append(f"compaction: {', '.join(f'{k} {_short(data[k])}' for k in bad)} "
                            f"not whole numbers, defaulted to 0")
            data.update(dict.fromkeys(bad, 0))
    elif kind in ("pin", "unpin") and type(data.get("message_id")) is not str:
        problems.append(f"{kind} without a message id, skipped")
        return None
    return Event(kind, eid, data)
