"""The append-only session log (native JSONL).

Line types:
  {"type": "session", "id", "version", "created", "model", "window", ...}   header, first line
  {"type": "message", "id", "turn", "role", "content", "tool_calls"?, "tool_call_id"?, "meta"?}
  {"type": <event>, "id", ...}  a stateful decision; see `EVENT_TYPES`

Raw messages are never rewritten: compaction shapes the view sent to the
model, it never edits this file.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from breakwater.core.message import Message

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
        self._n_messages = sum(1 for e in self.entries if isinstance(e, Message))
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
        """Append one entry; written and flushed before returning when file-backed."""
        record = entry.to_record()
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


def iter_json_lines(path: Path) -> Iterator[tuple[int, Any | None, str | None]]:
    """Yield (line number, parsed object or None, problem or None) for every non-blank line.

    Survives broken JSON, a truncated last line, several objects glued on one
    line (each is yielded), bytes that are not UTF-8 (replaced, reported) and
    very long lines.
    """
    fh = open_session_file(path)
    decoder = json.JSONDecoder()
    with fh:
        lineno = 0
        for raw in fh:
            lineno += 1
            complete = raw.endswith(b"\n")
            raw = raw.strip()
            if not raw:
                continue
            try:
                text = raw.decode("utf-8")
                bad_bytes = None
            except UnicodeDecodeError as exc:
                text = raw.decode("utf-8", errors="replace")
                bad_bytes = f"bytes that are not UTF-8 at column {exc.start + 1} were replaced"
            objs: list[Any] = []
            pos, err = 0, None
            while pos < len(text):
                try:
                    obj, end = decoder.raw_decode(text, pos)
                except json.JSONDecodeError as exc:
                    err = exc
                    break
                objs.append(obj)
                pos = end
                while pos < len(text) and text[pos] in " \t\r":
                    pos += 1
            if err is not None and not objs:
                if not complete:
                    yield lineno, None, f"truncated last line ({len(raw)} bytes), skipped"
                else:
                    yield lineno, None, f"not valid JSON ({err.msg} at column {err.colno}), skipped"
                continue
            problem = bad_bytes
            if len(objs) > 1 or err is not None:
                what = f"{len(objs)} JSON objects glued on one line"
                what += ", loaded each" if err is None else f", loaded {len(objs)}, rest is broken"
                problem = what if problem is None else f"{problem}; {what}"
            for i, obj in enumerate(objs):
                yield lineno, obj, problem if i == 0 else None


def load_native(path: Path) -> SessionLog:
    """Load a native session log; bad lines become `issues`, the rest loads."""
    path = Path(path)
    header: dict[str, Any] = {}
    entries: list[Entry] = []
    issues: list[LoadIssue] = []
    n_msgs = n_events = 0
    assistants = 0
    for lineno, obj, problem in iter_json_lines(path):
        if problem:
            issues.append(LoadIssue(str(path), lineno, problem))
        if obj is None:
            continue
        if not isinstance(obj, dict):
            issues.append(LoadIssue(str(path), lineno, f"expected a JSON object, got {type(obj).__name__}, skipped"))
            continue
        kind = obj.get("type")
        if kind == "session":
            if not header:
                header = obj
            continue
        if kind == "message" or (kind is None and "role" in obj):
            role = obj.get("role")
            if not isinstance(role, str) or not role:
                issues.append(LoadIssue(str(path), lineno, "message without a role, skipped"))
                continue
            msg = Message.from_record(obj, fallback_id=f"m{n_msgs:05d}")
            if "turn" not in obj:
                msg = Message(msg.id, msg.role, msg.content, msg.tool_calls, msg.tool_call_id, msg.name,
                              assistants + 1 if role != "assistant" else assistants + 1, msg.meta)
            if role == "assistant":
                assistants += 1
            entries.append(msg)
            n_msgs += 1
        elif isinstance(kind, str):
            entries.append(Event.from_record(obj, fallback_id=f"e{n_events:05d}"))
            n_events += 1
        else:
            issues.append(LoadIssue(str(path), lineno, "line has no \"type\", skipped"))
    if not header and not entries:
        if issues:
            raise SessionLogError(f"{path}: no loadable lines ({issues[0].reason} at line {issues[0].line})")
        raise SessionLogError(f"{path}: empty session file")
    return SessionLog(header=header, entries=entries, path=path, issues=issues)
