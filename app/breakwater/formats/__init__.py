"""Reading sessions in every supported format (auto-detected)."""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path
from typing import NamedTuple

from breakwater.core.log.json_lines import (ArrayItems, NotPlain, SessionLogError, array_items, decode_document,
                                            open_session_file)
from breakwater.core.log.session_log import LoadIssue, SessionLog, load_native
from breakwater.formats.detect import (looks_like_claude_code, looks_like_codex, looks_like_mini_swe_agent,
                                       looks_like_openai, looks_like_openhands_eval, looks_like_openhands_event,
                                       looks_like_pi, looks_like_swe_agent)

__all__ = ["load_session", "load_sessions", "detect_format", "pick_session", "holds", "SessionLogError", "FORMATS"]

FORMATS = ("native", "claude-code", "codex", "pi", "openai", "swe-agent", "mini-swe-agent", "openhands")


MAX_DOCUMENT_BYTES = 256 * 1024 * 1024
# the formats whose loader takes a document already read (one JSON value, or a file of one line)
DOCUMENT_FORMATS = ("swe-agent", "mini-swe-agent", "openhands")


class _Sniffed(NamedTuple):
    first: object | None      # the first record: enough to tell the formats apart
    is_list: bool             # whether the file is one JSON list
    document: object | None   # the whole file, when telling needed it read: the loader takes it from here
    notes: tuple[str, ...] = ()


def _sniff(path: Path) -> _Sniffed:
    with open_session_file(path) as fh:
        head = fh.read(65536)
        text = head.decode("utf-8", errors="replace").lstrip()
        if not text:
            return _Sniffed(None, False, None)
        size = os.fstat(fh.fileno()).st_size   # of the file opened, not whatever is at the name by now
        if text.startswith("[") and size < MAX_DOCUMENT_BYTES:
            fh.seek(0)   # read whole at once: the head and the rest joined would be copied again
            return _array(path, fh)
        # the whole first line, however long (a first record past the head was taken for broken JSON)
        fh.seek(0)
        line = fh.readline(MAX_DOCUMENT_BYTES)
        whole = not fh.read(65536).strip() and not fh.read(1)
        if whole and text.startswith("{"):   # one line and nothing after it: a one-line JSON document
            found = _document(path, line, False)
            if found.document is not None:
                return found
        try:  # the first line; several objects glued on it: the first one decides
            return _Sniffed(json.JSONDecoder().raw_decode(line.decode("utf-8", errors="replace").strip())[0],
                            False, None)
        except (ValueError, RecursionError):
            pass
        if text.startswith("{") and size < MAX_DOCUMENT_BYTES:   # one pretty-printed JSON document
            fh.seek(0)
            return _document(path, fh.read(MAX_DOCUMENT_BYTES), False)
    return _Sniffed(None, False, None)


def _array(path: Path, fh) -> _Sniffed:
    """A file that is one JSON array: its items, decoded by the loader as it reaches them (the first
    one now, to tell the format), or when msgspec cannot split it the document read whole. The file's
    bytes are read here, not by the caller, so that nothing holds them once the items are copied out."""
    raw = fh.read(MAX_DOCUMENT_BYTES)
    items = array_items(path, raw)
    if items is not None:
        try:
            first = items.first()
        except NotPlain:
            items = None
    if items is None:
        return _document(path, raw, True)
    del raw
    return _Sniffed(first, True, items)


def _document(path: Path, raw: bytes, is_list: bool) -> _Sniffed:
    """The file read whole as one JSON document, once: the loader is handed what was read."""
    notes: list[str] = []
    try:
        data = decode_document(raw, path, notes)
    except SessionLogError:   # the loader reads it again and says why it cannot
        return _Sniffed(None, is_list, None)
    first = (data[0] if data else None) if is_list else data
    return _Sniffed(first, is_list, data, tuple(notes))


def readers_that_load(path: Path, tried: str) -> list[str]:
    """The formats other than `tried` whose reader finds messages in `path`: what to suggest when
    detection guessed wrong. Only asked after a failure, and only for a file small enough to read."""
    if path.stat().st_size >= MAX_DOCUMENT_BYTES:
        return []
    found = []
    for fmt in FORMATS:
        if fmt == tried:
            continue
        try:
            logs = load_sessions(path, fmt)
        except (SessionLogError, OSError, ValueError, RecursionError):
            continue
        if any(log.messages for log in logs):
            found.append(fmt)
    return found


def detect_format(path: Path) -> str:
    """The format of a session file, from its content (never its name)."""
    return _detected(_sniff(Path(path)))


def _detected(sniffed: _Sniffed) -> str:
    obj, is_list = sniffed.first, sniffed.is_list
    if is_list:
        return "openhands" if looks_like_openhands_event(obj) else "openai"
    if not isinstance(obj, dict):
        return "native"
    if obj.get("type") == "session" and "created" in obj:
        return "native"
    for fmt, test in (("mini-swe-agent", looks_like_mini_swe_agent), ("swe-agent", looks_like_swe_agent),
                      ("openai", looks_like_openai), ("pi", looks_like_pi), ("codex", looks_like_codex),
                      ("openhands", looks_like_openhands_event), ("openhands", looks_like_openhands_eval),
                      ("claude-code", looks_like_claude_code)):
        if test(obj):
            return fmt
    return "native"


def _importer(fmt: str):
    if fmt == "claude-code":
        from breakwater.formats.claude_code import load_claude_code as load
    elif fmt == "codex":
        from breakwater.formats.codex import load_codex as load
    elif fmt == "pi":
        from breakwater.formats.pi import load_pi as load
    elif fmt == "swe-agent":
        from breakwater.formats.swe_agent import load_swe_agent as load
    elif fmt == "mini-swe-agent":
        from breakwater.formats.swe_agent import load_mini_swe_agent as load
    elif fmt == "openhands":
        from breakwater.formats.openhands import load_openhands as load
    else:
        raise SessionLogError(f"unknown format {fmt!r} (one of auto, {', '.join(FORMATS)})")
    return load


def load_sessions(path: str | Path, fmt: str = "auto") -> list[SessionLog]:
    """Every session the file holds (a Claude Code main file and its subagents, an eval
    output with one session per instance); the principal one first. A file that detection
    cannot read says which `--format` would."""
    path = Path(path)
    if fmt != "auto":
        return _load(path, fmt)
    document: _Sniffed | None = _sniff(path)
    fmt = _detected(document)
    if document.document is None:
        document = None
    try:
        return _load(path, fmt, document)
    except SessionLogError as exc:
        others = readers_that_load(path, fmt) if path.is_file() else []
        if not others:
            raise
        raise SessionLogError(f"{exc}; read as {fmt} (detected); it loads with "
                              f"{' or '.join(f'--format {o}' for o in others)}") from None


def _load(path: Path, fmt: str, document: _Sniffed | None = None) -> list[SessionLog]:
    # as load_native: a transcript is up to millions of objects and next to no cycles; the collector,
    # run every few hundred allocations, would walk all those read so far again and again (a third of
    # the load of a 5.8 MB pi session, 0.33 s -> 0.23 s)
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load_format(path, fmt, document)
    finally:
        if collecting:
            gc.enable()


def _load_format(path: Path, fmt: str, document: _Sniffed | None) -> list[SessionLog]:
    if fmt == "native":
        return [load_native(path)]
    if fmt == "openai":
        from breakwater.formats.openai_chat import load_openai_messages

        if document is not None:
            return [load_openai_messages(path, document.document, list(document.notes))]
        return [load_openai_messages(path)]
    load = _importer(fmt)
    # a document read to tell its format is not read again (the notes of one that needed repairs
    # are worded per format: such a file is read by the format's own loader)
    if document is not None and not document.notes and fmt in DOCUMENT_FORMATS:
        logs = load(path, document.document)
    else:
        logs = load(path)
    if not any(log.entries for log in logs):
        reason = logs[0].issues[0] if logs and logs[0].issues else "no messages"
        raise SessionLogError(f"{path}: nothing to import as {fmt} ({reason})")
    return logs


def load_session(path: str | Path, fmt: str = "auto", session: str | None = None) -> SessionLog:
    """One session: the file's principal one, or the one named `session`."""
    logs = load_sessions(path, fmt)
    if session is None:
        if len(logs) > 1:
            logs[0].issues.append(LoadIssue(str(path), 0, f"{holds(logs)}; this is {logs[0].id} "
                                            f"(--session ID picks another)"))
        return logs[0]
    return pick_session(path, logs, session)


def holds(logs: list[SessionLog], shown: int = 8) -> str:
    """What a file of several sessions holds, in a few words: their ids and sizes."""
    named = ", ".join(f"{log.id} ({len(log.messages):,} messages)" for log in logs[:shown])
    more = f" and {len(logs) - shown:,} more" if len(logs) > shown else ""
    return f"the file holds {len(logs):,} sessions: {named}{more}"


def pick_session(path: str | Path, logs: list[SessionLog], session: str) -> SessionLog:
    """The session named `session` (its id, or the end of it: `sidechain-sys1`)."""
    for log in logs:
        if log.id == session:
            return log
    for log in logs:
        if log.id.endswith(session):
            return log
    raise SessionLogError(f"{path}: no session {session!r}; {holds(logs)}")
