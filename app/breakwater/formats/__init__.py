"""Reading sessions in every supported format (auto-detected)."""

from __future__ import annotations

import json
from pathlib import Path

from breakwater.core.log.json_lines import SessionLogError, open_session_file
from breakwater.core.log.session_log import LoadIssue, SessionLog, load_native
from breakwater.formats.detect import (looks_like_claude_code, looks_like_codex, looks_like_mini_swe_agent,
                                       looks_like_openai, looks_like_openhands_eval, looks_like_openhands_event,
                                       looks_like_pi, looks_like_swe_agent)

__all__ = ["load_session", "load_sessions", "detect_format", "SessionLogError", "FORMATS"]

FORMATS = ("native", "claude-code", "codex", "pi", "openai", "swe-agent", "mini-swe-agent", "openhands")


MAX_DOCUMENT_BYTES = 256 * 1024 * 1024


def _sniff(path: Path) -> tuple[object | None, bool]:
    """(the first record, whether the file is one JSON list): enough to tell the formats apart."""
    with open_session_file(path) as fh:
        head = fh.read(65536)
    text = head.decode("utf-8", errors="replace").lstrip()
    if not text:
        return None, False
    if text.startswith("[") and path.stat().st_size < MAX_DOCUMENT_BYTES:
        try:
            data = json.loads(path.read_bytes().decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            return None, True
        return (data[0] if isinstance(data, list) and data else None), True
    first_line = text.split("\n", 1)[0]
    try:  # the first line; several objects glued on it: the first one decides
        return json.JSONDecoder().raw_decode(first_line)[0], False
    except (ValueError, RecursionError):
        pass
    if text.startswith("{") and path.stat().st_size < MAX_DOCUMENT_BYTES:
        try:  # one pretty-printed JSON document
            return json.loads(path.read_bytes().decode("utf-8", errors="replace")), False
        except (ValueError, RecursionError):
            return None, False
    return None, False


def detect_format(path: Path) -> str:
    """The format of a session file, from its content (never its name)."""
    obj, is_list = _sniff(Path(path))
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
        raise SessionLogError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    return load


def load_sessions(path: str | Path, fmt: str = "auto") -> list[SessionLog]:
    """Every session the file holds (a Claude Code main file and its subagents, an eval
    output with one session per instance); the principal one first."""
    path = Path(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "native":
        return [load_native(path)]
    if fmt == "openai":
        from breakwater.formats.openai_chat import load_openai_messages

        return [load_openai_messages(path)]
    logs = _importer(fmt)(path)
    if not any(log.entries for log in logs):
        reason = logs[0].issues[0] if logs and logs[0].issues else "no messages"
        raise SessionLogError(f"{path}: nothing to import as {fmt} ({reason})")
    return logs


def load_session(path: str | Path, fmt: str = "auto", session: str | None = None) -> SessionLog:
    """One session: the file's principal one, or the one named `session`."""
    logs = load_sessions(path, fmt)
    if session is None:
        if len(logs) > 1:
            logs[0].issues.append(LoadIssue(str(path), 0, f"the file holds {len(logs)} sessions; this is "
                                            f"{logs[0].id} (`breakwater import --session ID` picks another)"))
        return logs[0]
    for log in logs:
        if log.id == session or log.id.endswith(session):
            return log
    raise SessionLogError(f"{path}: no session {session!r} (it holds {', '.join(log.id for log in logs)})")
