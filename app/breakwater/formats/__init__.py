"""Reading sessions in every supported format (auto-detected)."""

from __future__ import annotations

import json
from pathlib import Path

from breakwater.core.session_log import LoadIssue, SessionLog, SessionLogError, load_native, open_session_file
from breakwater.formats.openai_chat import load_openai_messages, looks_like_openai

__all__ = ["load_session", "load_sessions", "detect_format", "SessionLogError", "FORMATS"]

FORMATS = ("native", "claude-code", "codex", "pi", "openai", "swe-agent", "mini-swe-agent", "openhands")


def _first_object(path: Path) -> object | None:
    with open_session_file(path) as fh:
        head = fh.read(65536)
    text = head.decode("utf-8", errors="replace").lstrip()
    if not text:
        return None
    if text.startswith("["):
        return []
    first_line = text.split("\n", 1)[0]
    try:
        return json.loads(first_line)
    except ValueError:
        pass
    try:  # several objects glued on the first line: the first one decides
        return json.JSONDecoder().raw_decode(first_line)[0]
    except ValueError:
        pass
    if text.startswith("{") and path.stat().st_size < 256 * 1024 * 1024:
        try:  # one pretty-printed JSON document
            return json.loads(path.read_bytes().decode("utf-8", errors="replace"))
        except ValueError:
            return None
    return None


def detect_format(path: Path) -> str:
    from breakwater.formats.claude_code import looks_like_claude_code

    obj = _first_object(path)
    if obj == [] or (isinstance(obj, dict) and looks_like_openai(obj)):
        return "openai"
    if isinstance(obj, dict):
        kind = obj.get("type")
        if kind == "session" and "cwd" in obj and "created" not in obj:
            return "pi"
        if kind in ("session_meta", "turn_context", "response_item", "event_msg") or "payload" in obj:
            return "codex"
        if looks_like_claude_code(obj):
            return "claude-code"
        if "trajectory" in obj:
            return "swe-agent"
    if obj is None and path.suffix in (".traj", ".json"):
        return "swe-agent"
    return "native"


def load_sessions(path: str | Path, fmt: str = "auto") -> list[SessionLog]:
    """Every session the file holds (a Claude Code main file and its subagents, an eval
    output with one session per instance); the principal one first."""
    path = Path(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "native":
        return [load_native(path)]
    if fmt == "openai":
        return [load_openai_messages(path)]
    if fmt == "claude-code":
        from breakwater.formats.claude_code import load_claude_code

        logs = load_claude_code(path)
    else:
        raise SessionLogError(f"{path}: looks like a {fmt} transcript; this build does not read {fmt} yet")
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
