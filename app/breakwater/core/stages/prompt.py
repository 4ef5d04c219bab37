"""Prompt assembly in three layers (SPEC §7, seed 003 §5).

1. static system — role, tool names, rules. Byte-identical on every turn of every
   session with the same tools, so provider prompt caches hit. The tool schemas
   themselves go once, in the request's `tools`.
2. session-stable context — facts fixed for the session (id, workspace, model)
   and the project history; appended to the system message once, at session start.
3. per-turn volatile context — date, working directory, retrieved memory. It is
   never written into the system message: it rides in front of a user message
   the first time that message is sent, and stays there as it was sent, so only
   the end of the request changes from one turn to the next.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from breakwater.core.log.message import Message

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


def with_volatile(messages: Sequence[Message], volatile: str,
                  sent_with: Mapping[str, str] | None = None) -> list[Message]:
    """The request with the volatile layer: a user message that already went out carries the layer
    it was sent with (`sent_with`: message id -> layer); the latest user message, if new, gets
    `volatile`. Nothing else changes. Works on Messages so the request and its token estimate are
    built from the same list."""
    sent_with = sent_with or {}
    out = list(messages)
    latest = next((i for i in range(len(out) - 1, -1, -1) if out[i].role == "user"), None)
    for i, m in enumerate(out):
        if m.role != "user":
            continue
        layer = sent_with.get(m.id, volatile if i == latest else None)
        if layer:
            out[i] = m.with_content(f"{layer}\n\n{m.content}")
    return out
