"""The user's own decisions on a recording they must not change (SPEC §11 `--overlay`).

A pin, trigger or undo made while replaying a recorded session is written to a sibling
overlay file, never into the recording. Each overlay line is an event with `at`, the number
of log entries it comes after: it takes effect from the request that follows those entries,
exactly as the same event would have in a live session. Applying an overlay is a merge of
two event streams, so the pipeline stays a pure function of (log + overlay, policy).
"""

from __future__ import annotations

import io
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any, Iterable

from breakwater.core.log.beneath import MAX_OWN_BYTES, OwnedDir, SetAside
from breakwater.core.log.edits import View
from breakwater.core.log.message import Message
from breakwater.core.fold.pipeline import Compaction
from breakwater.core.policy import Policy
from breakwater.core.log.json_lines import SessionLogError, open_session_file, read_line
from breakwater.core.log.session_log import Entry, Event, LoadIssue, SessionLog
from breakwater.core.simulate import pipeline_at

OVERLAY_TYPES = ("pin", "unpin", "trigger", "undo", "compaction")
KEY_FIELD = {"undo": "target", "trigger": "stage", "compaction": "summary", "pin": "message_id",
             "unpin": "message_id"}
SUFFIX = ".overlay.jsonl"
COMPACTION_COUNTS = ("turn", "tokens_before", "tokens_after", "covered")
LOCK_TIMEOUT_S = 10.0


def state_dir() -> Path:
    """Breakwater's folder in the user's state directory ($XDG_STATE_HOME, else ~/.local/state)."""
    return Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "breakwater"


def overlay_path(session: Path) -> Path:
    """Where the overlay of `session` lives: beside it, named after it — except for the bundled
    samples (package data, maybe read-only), whose overlays live in the user's state directory."""
    samples = Path(str(resources.files("breakwater.sample_sessions")))
    if session.resolve().parent == samples.resolve():
        return state_dir() / "overlays" / (session.name + SUFFIX)
    return session.with_name(session.name + SUFFIX)


def position_of_turn(log: SessionLog, turn: int) -> int:
    """The entry count before turn `turn`'s request: an event placed there shapes that request."""
    seen = 0
    for i, entry in enumerate(log.entries):
        if isinstance(entry, Message) and entry.role == "assistant":
            seen += 1
            if seen == turn:
                return i
    return len(log.entries)


def load_overlay(path: Path) -> tuple[list[Event], list[LoadIssue]]:
    """Read an overlay file; a bad line is reported with its number and skipped."""
    events: list[Event] = []
    issues: list[LoadIssue] = []
    with open_session_file(path) as fh:   # a regular file only: never a FIFO or a link to /dev/zero
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_OWN_BYTES:   # a user's pins and undos are kilobytes: something else put this there
            raise SessionLogError(f"{path} is {size:,} bytes, more than an overlay may be ({MAX_OWN_BYTES:,}); "
                                  "not read")
        lines = [item for n, raw in enumerate(fh, 1) for item in read_line(n, raw)]
    for lineno, obj, problem in lines:
        if problem:
            issues.append(LoadIssue(str(path), lineno, problem))
        if obj is None:
            continue
        reason = _invalid(obj)
        if reason:
            issues.append(LoadIssue(str(path), lineno, f"{reason}, skipped"))
            continue
        events.append(Event.from_record(obj, fallback_id=f"o{len(events) + 1:05d}"))
    return events, issues


def _invalid(obj: Any) -> str | None:
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    if obj.get("type") not in OVERLAY_TYPES:
        return f"overlay events are {', '.join(OVERLAY_TYPES)}, not {obj.get('type')!r}"
    at = obj.get("at")
    if not isinstance(at, int) or isinstance(at, bool) or at < 0:
        return "\"at\" must be a non-negative entry count"
    key = KEY_FIELD[obj["type"]]
    if not isinstance(obj.get(key), str) or not obj[key]:
        return f"a {obj['type']} event needs \"{key}\""
    if obj["type"] == "compaction":
        for name in COMPACTION_COUNTS:
            value = obj.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                return f"\"{name}\" of a compaction must be a non-negative whole number, got {_short(value)}"
        for name in ("cut_id", "summarizer", "trigger", "policy"):
            if obj.get(name) is not None and not isinstance(obj[name], str):
                return f"\"{name}\" of a compaction must be text, got {_short(obj[name])}"
    return None


def _short(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (list, dict)) else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def apply_overlay(log: SessionLog, events: Iterable[Event]) -> SessionLog:
    """The log with the overlay's events merged in at their positions (the log itself is untouched)."""
    events = sorted(events, key=lambda ev: int(ev.get("at")))  # stable: same position keeps file order
    if not events:
        return log
    merged: list[Entry] = []
    k = 0
    n = len(log.entries)
    for i in range(n + 1):
        while k < len(events) and min(int(events[k].get("at")), n) == i:
            merged.append(events[k])
            k += 1
        if i < n:
            merged.append(log.entries[i])
    return SessionLog(header=log.header, entries=merged, path=log.path, issues=log.issues,
                      source_format=log.source_format)


class OverlayFile:
    """The overlay of one recording: read once, appended to line by line (flushed at once)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.events: list[Event] = []
        self.issues: list[LoadIssue] = []
        self.set_aside: SetAside | None = None   # a torn last line the latest `add` moved out of the file
        if self.path.exists():
            try:
                self.events, self.issues = load_overlay(self.path)
            except SessionLogError as exc:   # a FIFO, a device or gigabytes: shown, the recording still opens
                self.issues = [LoadIssue(str(self.path), 0, f"{exc}; the overlay's edits are not applied")]

    def next_id(self) -> str:
        used = {ev.id for ev in self.events}
        n = len(self.events) + 1
        while f"o{n:05d}" in used:
            n += 1
        return f"o{n:05d}"

    def add(self, type: str, at: int, **data: Any) -> Event:
        """Append one event. Under a lock beside the file, the overlay is read again first, so two
        writers (two replays of one recording) see each other's events and never share an id."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        folder = OwnedDir(self.path.parent)
        with folder.lock(self.path.name + ".lock", LOCK_TIMEOUT_S):
            if folder.exists(self.path.name):
                try:
                    self.events, self.issues = load_overlay(self.path)
                except SessionLogError as exc:
                    raise OSError(str(exc)) from None
            record = {"type": type, "id": self.next_id(), "at": at, **data}
            reason = _invalid(record)
            if reason:
                raise ValueError(reason)
            event = Event.from_record(record, fallback_id=record["id"])
            # never through a link planted at the overlay's name (issue 27), never half a line, and never
            # onto a torn last line (a full disk, a crash): that is set aside beside the file and said
            self.set_aside = folder.append(self.path.name, (json.dumps(record, ensure_ascii=False) + "\n").encode(),
                                           durable=False)
            if self.set_aside is not None:
                self.issues.append(LoadIssue(str(self.path), 0, str(self.set_aside)))
        self.events.append(event)
        return event

    def apply(self, log: SessionLog) -> SessionLog:
        return apply_overlay(log, self.events)

    def remove(self, ids: Iterable[str]) -> list[Event]:
        """Take events out of the file (and the undos naming them), every other line kept as it
        was, bad ones included; the events removed. The file is replaced whole, never half written,
        under the writers' lock, and neither it nor its temporary file is reached through a link
        (a tool may have planted one beside a session in the workspace, issue 27)."""
        gone = set(ids)
        folder = OwnedDir(self.path.parent)
        with folder.lock(self.path.name + ".lock", LOCK_TIMEOUT_S):
            data = folder.read(self.path.name)
            lines = list(io.BytesIO(data))   # split as iter_json_lines numbers them
            records = [(n, obj) for n, raw in enumerate(lines, 1) for _, obj, _ in read_line(n, raw)
                       if obj is not None and not _invalid(obj)]
            named = [(n, str(obj.get("id") or f"o{valid:05d}"), obj)   # the id load_overlay gives one without
                     for valid, (n, obj) in enumerate(records, 1)]
            gone |= {i for _, i, obj in named if obj.get("type") == "undo" and str(obj.get("target")) in gone}
            drop = {n for n, i, _ in named if i in gone}
            removed = [ev for ev in self.events if ev.id in gone]
            folder.replace(self.path.name, b"".join(line for n, line in enumerate(lines, 1) if n not in drop))
            # read back: an event written without an id is named by its place, which may have moved
            self.events, self.issues = load_overlay(self.path)
        return removed


def manual_compaction(log: SessionLog, policy: Policy, turn: int, counter: str = "exact",
                      model: str | None = None) -> tuple[Compaction | None, View]:
    """The deep compaction a user asks for at request `turn` of a recording (extractive summary,
    no model), and the view it gives; the caller decides whether to record it."""
    view, comp = pipeline_at(log, policy, turn, counter, model).view("manual")
    return comp, view


def compaction_record(comp: Compaction) -> dict[str, Any]:
    """The fields of a compaction event an overlay stores (its id is the overlay's own)."""
    data = dict(comp.to_event().data)
    data.pop("policy", None)   # a manual compaction applies under any policy
    return data
