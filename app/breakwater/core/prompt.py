"""Prompt assembly in three layers (SPEC §7, seed 003 §5).

1. static system — role, tools, rules. Byte-identical on every turn of every
   session with the same tools, so provider prompt caches hit.
2. session-stable context — facts fixed for the session (id, workspace, model)
   and the project history; appended to the system message once, at session start.
3. per-turn volatile context — date, working directory, retrieved memory. It is
   never written into the system message: it rides in front of the latest user
   message of the request, so everything before that message stays cacheable.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from breakwater.core.message import Message

STATIC_RULES = """You are a software engineering agent working in a local workspace through tools.

Rules:
- Work step by step. Prefer reading the relevant part of a file (read_file with start_line/end_line) \
over reading whole large files.
- Long tool output is cut in the middle to protect your context; the full output is saved under \
.agent/spill/ and the result tells you the path and how to read ranges of it with read_file.
- Earlier tool output may be cleared or summarized to save context. If you need it again, run the tool again \
or read the spill file; never guess what it said.
- Stay inside the workspace. Do not print secrets.
- When the task is done, answer with a short final report: what changed, where, and how it was checked."""

PROJECT_HISTORY_HEADER = "[Project History]"
RETRIEVED_HEADER = "[Retrieved Memory]"
RETRIEVED_FOOTER = "[Use this context if relevant to the current task.]"
VOLATILE_HEADER = "[Context for this turn]"


def static_system(tool_schemas: Sequence[dict[str, Any]] = ()) -> str:
    """Layer 1. Depends only on the tool set, serialized canonically."""
    names = [t.get("function", {}).get("name", "?") for t in tool_schemas]
    text = STATIC_RULES
    if names:
        text += "\n\nTools: " + ", ".join(names) + "."
        text += "\nTool schemas: " + json.dumps(list(tool_schemas), sort_keys=True, separators=(",", ":"))
    return text


def session_context(session_id: str, workspace: str, model: str, project_history: str = "") -> str:
    """Layer 2."""
    lines = ["[Session]", f"Session: {session_id[:8]}", f"Workspace: {workspace}", f"Model: {model}"]
    text = "\n".join(lines)
    if project_history.strip():
        body = project_history.strip()
        if not body.startswith(PROJECT_HISTORY_HEADER):
            body = f"{PROJECT_HISTORY_HEADER}\n{body}"
        text += "\n\n" + body
    return text


def system_prompt(static: str, session: str) -> str:
    return f"{static}\n\n{session}"


def volatile_context(date: str, cwd: str, retrieved: str | None = None) -> str:
    """Layer 3."""
    text = f"{VOLATILE_HEADER}\nDate: {date}\nWorking directory: {cwd}"
    if retrieved and retrieved.strip():
        body = retrieved.strip()
        if not body.startswith(RETRIEVED_HEADER):
            body = f"{RETRIEVED_HEADER}\n{body}\n{RETRIEVED_FOOTER}"
        text += "\n\n" + body
    return text


def with_volatile(messages: Sequence[Message], volatile: str) -> list[Message]:
    """Put the volatile layer in front of the latest user message; nothing else changes.

    Works on Messages so the request and its token estimate are built from the same list."""
    out = list(messages)
    for i in range(len(out) - 1, -1, -1):
        if out[i].role == "user":
            out[i] = out[i].with_content(f"{volatile}\n\n{out[i].content}")
            break
    return out


@dataclass(frozen=True, slots=True)
class PrefixReport:
    stable_chars: int      # chars of the system message: identical on every request of the session
    static_chars: int      # chars of layer 1: identical across sessions


def stable_prefix(api_messages: list[dict[str, Any]], static: str) -> PrefixReport:
    system = api_messages[0].get("content") if api_messages and api_messages[0].get("role") == "system" else ""
    system = system or ""
    return PrefixReport(len(system), len(static) if system.startswith(static) else 0)
