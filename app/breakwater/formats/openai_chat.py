"""Plain OpenAI chat-completions message arrays (a JSON list, or an object with `messages`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from breakwater.core.message import Message
from breakwater.core.session_log import Entry, LoadIssue, SessionLog, SessionLogError


def looks_like_openai(obj: Mapping[str, Any]) -> bool:
    return isinstance(obj.get("messages"), list) and "type" not in obj


def load_openai_messages(path: Path) -> SessionLog:
    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8", errors="replace"))
    except ValueError as exc:
        raise SessionLogError(f"{path}: not valid JSON ({exc})") from None
    if isinstance(data, Mapping):
        data = data.get("messages")
    if not isinstance(data, list):
        raise SessionLogError(f"{path}: expected a list of chat messages")
    entries: list[Entry] = []
    issues: list[LoadIssue] = []
    assistants = 0
    for i, rec in enumerate(data):
        if not isinstance(rec, Mapping) or not isinstance(rec.get("role"), str):
            issues.append(LoadIssue(str(path), i + 1, f"item {i} is not a chat message, skipped"))
            continue
        rec = dict(rec)
        rec["id"] = f"m{len(entries):05d}"
        if rec["role"] == "assistant":
            assistants += 1
            rec["turn"] = assistants
        else:
            rec["turn"] = 0 if rec["role"] == "system" and not entries else assistants + 1
        rec.pop("meta", None)
        entries.append(Message.from_record(rec))
    return SessionLog(header={"id": Path(path).stem}, entries=entries, path=Path(path), issues=issues,
                      source_format="openai")
