"""Reading sessions in every supported format (auto-detected)."""

from __future__ import annotations

import json
from pathlib import Path

from breakwater.core.session_log import SessionLog, SessionLogError, load_native, open_session_file
from breakwater.formats.openai_chat import load_openai_messages, looks_like_openai

__all__ = ["load_session", "detect_format", "SessionLogError"]


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
    if text.startswith("{") and path.stat().st_size < 256 * 1024 * 1024:
        try:  # one pretty-printed JSON document
            return json.loads(path.read_bytes().decode("utf-8", errors="replace"))
        except ValueError:
            return None
    return None


def detect_format(path: Path) -> str:
    obj = _first_object(path)
    if obj == [] or (isinstance(obj, dict) and looks_like_openai(obj)):
        return "openai"
    if isinstance(obj, dict):
        kind = obj.get("type")
        if kind == "session" and "cwd" in obj and "created" not in obj:
            return "pi"
        if kind in ("session_meta", "turn_context", "response_item", "event_msg") or "payload" in obj:
            return "codex"
        if "sessionId" in obj or "parentUuid" in obj or kind in ("summary", "file-history-snapshot"):
            return "claude-code"
        if "trajectory" in obj:
            return "swe-agent"
    if obj is None and path.suffix in (".traj", ".json"):
        return "swe-agent"
    return "native"


def load_session(path: str | Path, fmt: str = "auto") -> SessionLog:
    path = Path(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "native":
        return load_native(path)
    if fmt == "openai":
        return load_openai_messages(path)
    raise SessionLogError(f"{path}: looks like a {fmt} transcript; this build reads native and OpenAI message "
                          f"files (importers for {fmt} come with `breakwater import`)")
