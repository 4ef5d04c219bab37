"""The append-only session log (native JSONL).

Line types:
  {"type": "session", "id", "version", "created", "model", "window", ...}   header, first line
  {"type": "message", "id", "turn", "role", "content", "tool_calls"?, "tool_call_id"?, "meta"?}
  {"type": <event>, "id", ...}  a stateful decision; see `EVENT_TYPES`

Raw messages are never rewritten: compaction shapes the view sent to the
model, it never edits this file.
"""

from __future__ import annotations

import gc
import json
import re
import sys
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import repeat
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import msgspec

from breakwater.core.message import ROLES, Message, replace_surrogates, short_value as _short

_ROLES = frozenset(ROLES)
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


class SessionLogError(Exception):
    """The file cannot be read at all (missing, a directory, no permission, empty)."""


def new_session_id() -> str:
    return uuid.uuid4().hex


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
        self._fh = None
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
    def create(cls, path: Path, header: Mapping[str, Any]) -> "SessionLog":
        path.parent.mkdir(parents=True, exist_ok=True)
        head = {"type": "session", "version": FORMAT_VERSION, "id": new_session_id(), "created": utc_now()}
        head.update(header)
        log = cls(header=head, path=path)
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(json.dumps(head, ensure_ascii=False) + "\n")
        return log

    def append(self, entry: Entry) -> Entry:
        """Append one entry; written and flushed before returning when file-backed. Returns the
        entry as logged: a lone surrogate (unencodable) in any of its texts becomes U+FFFD."""
        record = entry.to_record()
        line = json.dumps(record, ensure_ascii=False) + "\n"
        if not line.isascii() and _SURROGATES.search(line):
            record = replace_surrogates_in(record)
            entry = (Message.from_record(record) if isinstance(entry, Message)
                     else Event.from_record(record, entry.id))
            line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self.entries.append(entry)
            if isinstance(entry, Message):
                self._n_messages += 1
            else:
                self._n_events += 1
            if self.path is not None:
                if self._fh is None:
                    self._fh = open(self.path, "a", encoding="utf-8")
                self._fh.write(line)
                self._fh.flush()
        return entry

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def next_message_id(self) -> str:
        return f"m{self._n_messages:05d}"

    def next_event_id(self) -> str:
        return f"e{self._n_events:05d}"


# -- loading -----------------------------------------------------------------------------------
def open_session_file(path: Path):
    """Open for binary reading; every reason it cannot be read becomes one clear SessionLogError."""
    try:
        return open(path, "rb")
    except IsADirectoryError:
        raise SessionLogError(f"{path}: is a directory, not a session file") from None
    except FileNotFoundError:
        raise SessionLogError(f"{path}: no such file") from None
    except PermissionError:
        raise SessionLogError(f"{path}: permission denied") from None
    except OSError as exc:
        raise SessionLogError(f"{path}: cannot read ({exc.strerror or exc})") from None


_SCAN = json.JSONDecoder().scan_once
# A well-formed line is read by msgspec, twice as fast as the json module and the same objects (exact
# integers, the same floats, the last of a repeated key); whatever it refuses (NaN, a number out of
# range, broken JSON) the json module reads as before. So do a line with a surrogate escape (repaired
# below) and one with many brackets (msgspec's nesting limit is one level past json's).
_DECODE = msgspec.json.Decoder().decode
_BRACKETS = 256
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATES = re.compile("[\ud800-\udfff]")
_LONE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
DIGITS_LIMIT = sys.get_int_max_str_digits() or 4300


def _bounded_int(digits: str) -> int | None:
    return int(digits) if len(digits) <= DIGITS_LIMIT else None


_LENIENT = json.JSONDecoder(parse_int=_bounded_int)


def lenient_loads(text: str) -> Any:
    """json.loads, except that an integer too long to convert becomes None."""
    return _LENIENT.decode(text)


def iter_json_lines(path: Path) -> Iterator[tuple[int, Any | None, str | None]]:
    """Yield (line number, parsed object or None, problem or None) for every non-blank line.

    Survives broken JSON, a truncated last line, several objects glued on one
    line (each is yielded), bytes that are not UTF-8 (replaced, reported), very
    long lines, nesting too deep to parse, integers too long to convert (read
    as null) and lone surrogate escapes (replaced by U+FFFD). None with a problem:
    the line is skipped.
    """
    fh = open_session_file(path)
    scan, decode = _SCAN, _DECODE
    with fh:
        lineno = 0
        for raw in fh:
            lineno += 1
            if ((len(raw) < 2 * _BRACKETS or raw.count(b"[") + raw.count(b"{") < _BRACKETS)
                    and not (b"\\u" in raw and _SURROGATE_ESCAPE.search(raw))):
                try:  # the fast path: one well-formed object per line
                    obj = decode(raw)
                except (ValueError, RecursionError):   # msgspec.DecodeError is a ValueError
                    pass
                else:
                    if obj is None:
                        yield lineno, None, "expected a JSON object, got null, skipped"
                    else:
                        yield lineno, obj, None
                    continue
            try:  # one object per line, straight to the C scanner
                text = raw.decode()
                obj, end = scan(text, 0)
                if end != len(text) and not text[end:].isspace():
                    raise ValueError
            except (ValueError, StopIteration, RecursionError):
                if raw.strip():
                    yield from _slow_line(lineno, raw)
                continue
            if obj is None:
                yield lineno, None, "expected a JSON object, got null, skipped"
            elif "\\u" in text and _LONE_ESCAPE.search(text) and (fixed := replace_surrogates_in(obj)) is not None:
                yield lineno, fixed, "a lone surrogate escape (not a character) was replaced by U+FFFD"
            else:
                yield lineno, obj, None


def _slow_line(lineno: int, raw: bytes) -> Iterator[tuple[int, Any | None, str | None]]:
    complete = raw.endswith(b"\n")
    raw = raw.strip()
    try:
        text = raw.decode("utf-8")
        problems = []
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        problems = [f"bytes that are not UTF-8 at column {exc.start + 1} were replaced"]
    objs: list[Any] = []
    pos, err = 0, None
    decoder = json.JSONDecoder()
    while pos < len(text):
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            err = exc
            break
        except RecursionError:
            yield lineno, None, "nested too deeply to read, skipped"
            return
        except ValueError:  # an integer longer than int() converts
            obj, end = _LENIENT.raw_decode(text, pos)
            problems.append(f"a number of more than {DIGITS_LIMIT} digits was read as null")
        objs.append(obj)
        pos = end
        while pos < len(text) and text[pos] in " \t\r":
            pos += 1
    if err is not None and not objs:
        if not complete:
            yield lineno, None, f"truncated last line ({len(raw)} bytes), skipped"
        else:
            yield lineno, None, f"not valid JSON ({err.msg} at column {err.colno}), skipped"
        return
    if len(objs) > 1 or err is not None:
        what = f"{len(objs)} JSON objects glued on one line"
        problems.append(what + (", loaded each" if err is None else f", loaded {len(objs)}, rest is broken"))
    if "\\u" in text:
        for i, obj in enumerate(objs):
            fixed = replace_surrogates_in(obj)
            if fixed is not None:
                objs[i] = fixed
                problems.append("a lone surrogate escape (not a character) was replaced by U+FFFD")
    problem = "; ".join(problems) or None
    for i, obj in enumerate(objs):
        if obj is None:
            yield lineno, None, "expected a JSON object, got null, skipped"
        else:
            yield lineno, obj, problem if i == 0 else None


def replace_surrogates_in(obj: Any) -> Any | None:
    """`obj` with lone surrogates replaced in every string (keys too), or None if it had none."""
    if isinstance(obj, str):
        fixed = replace_surrogates(obj)
        return None if fixed == obj else fixed
    found = False
    stack = [obj]
    while stack:  # iterative: the object may be nested as deep as the parser allows
        node = stack.pop()
        items = list(node.items()) if isinstance(node, dict) else enumerate(node)
        for key, value in items:
            if isinstance(value, str):
                fixed = replace_surrogates(value)
                if fixed != value:
                    node[key] = fixed
                    found = True
            elif isinstance(value, (dict, list)):
                stack.append(value)
            if isinstance(node, dict) and isinstance(key, str) and (new_key := replace_surrogates(key)) != key:
                node[new_key] = node.pop(key)
                found = True
    return obj if found else None


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


def _load_native(path: Path) -> SessionLog:
    where = str(path)
    header: dict[str, Any] = {}
    entries: list[Entry] = []
    issues: list[LoadIssue] = []
    n_msgs = n_events = 0
    assistants = 0
    problems: list[str] = []
    from_record = Message.from_record
    for lineno, obj, problem in iter_json_lines(path):
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
                    msg = from_record(obj, "" if type(mid) is str and mid else f"m{n_msgs:05d}", problems,
                                      assistants + 1)
                    if msg.meta is not None and type(msg.meta.get("source")) is dict:
                        msg = _checked_source(msg, problems)
                    if role == "assistant":
                        assistants += 1
                    entries.append(msg)
                    n_msgs += 1
            elif kind == "session":
                if not header:
                    header = _checked_header(obj, problems)
            elif type(kind) is str:
                event = _checked_event(obj, f"e{n_events:05d}", problems)
                if event is not None:
                    entries.append(event)
                    n_events += 1
            else:
                problems.append("line has no \"type\", skipped")
        if problems:
            issues.append(LoadIssue(where, lineno, "; ".join(problems)))
            problems = []
    if not header and not entries:
        if issues:
            raise SessionLogError(f"{path}: no loadable lines ({issues[0].reason} at line {issues[0].line})")
        raise SessionLogError(f"{path}: empty session file")
    return SessionLog(header=header, entries=entries, path=path, issues=issues)


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
