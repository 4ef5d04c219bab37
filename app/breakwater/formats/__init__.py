"""Reading sessions in every supported format (auto-detected)."""

from __future__ import annotations

import json
from pathlib import Path

from breakwater.core.session_log import SessionLog, SessionLogError, load_native
from breakwater.formats.openai_chat import load_openai_messages, looks_like_openai

__all__ = ["load_session", "detect_format", "SessionLogError"]


def _first_object(path: Path) -> object | None:
    with open(path, "rb") as fh:
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
        return None


def detect_format(path: Path) -> str:
    try:
        obj = _first_object(path)
    except IsADirectoryError:
        raise SessionLogError(f"{path}: is a directory, not a session file") from None
    except FileNotFoundError:
        raise SessionLogError(f"{path}: no such file") from None
    except PermissionError:
        raise SessionLogError(f"{path}: permission denied") from None
    if obj == [] or (isinstance(obj, dict) and looks_like_openai(obj)):
        return "openai"
    return "native"


def load_session(path: str | Path, fmt: str = "auto") -> SessionLog:
    path = Path(path)
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "native":
        return load_native(path)
    if fmt == "openai":
        return load_openai_messages(path)
    raise SessionLogError(f"{path}: format {fmt!r} is not supported yet")
