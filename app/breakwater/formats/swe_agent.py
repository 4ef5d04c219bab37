"""SWE-agent and mini-swe-agent trajectories.

SWE-agent `.traj`: `history` is the conversation (demonstrations inlined), in a
function-calling variant (assistant `tool_calls`, `role: tool` results naming
their calls in a `tool_call_ids` list) or a text-action variant (the command in
the assistant text, the observation a user message, marked so in its meta). `trajectory[i].messages`
repeats the whole prompt of each step and is not imported.

mini-swe-agent `.traj.json`: `messages` is a chat-completions list (1.1 and 2.x:
tool calls; v1: text with fenced commands, the observations user messages, marked so), ending
with an `exit` message that holds the submission. Each assistant message's `extra.response` is the raw
litellm response, whose `usage` becomes a usage event.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

from breakwater.core.log.session_log import SessionLog, SessionLogError
from breakwater.formats.builder import SessionBuilder
from breakwater.formats.openai_chat import feed_chat_message, feed_usage, read_json


def _ids(value: Any) -> list[str]:
    """`tool_call_ids` is a list; some writers stored its Python repr as a string."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return [value]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


# where the framework's prompt puts the task statement (SWE-agent's and mini-swe-agent's templates)
_TASK = re.compile(r"<(pr_description|issue_description|issue|problem_statement)>\s*(?:Consider the following PR "
                   r"description:\s*)?(.*?)\s*</\1>|ISSUE:\s*\n(.*?)(?:\n\s*INSTRUCTIONS:|$)", re.DOTALL)
_RETURNCODE = re.compile(r"^\s*<returncode>\s*(-?\d+)\s*</returncode>")


def task_span(text: str) -> list[int] | None:
    """[start, end] of the task statement in a first user message, the template's wrapping left out."""
    m = _TASK.search(text)
    if m is None:
        return None
    group = 2 if m.group(2) is not None else 3
    return [m.start(group), m.end(group)] if m.end(group) > m.start(group) else None


def _first_task(b_extra: dict[str, Any], rec: dict, marked: bool) -> bool:
    """Mark the task statement of the first non-demonstration user message; whether one is marked now."""
    if marked or rec.get("role") != "user" or rec.get("is_demo") or not isinstance(rec.get("content"), str):
        return marked
    span = task_span(rec["content"])
    if span is not None:
        b_extra["task"] = span
    return span is not None


def _returncode(rec: dict) -> dict[str, Any]:
    """mini-swe-agent reports a command's exit status as `<returncode>N</returncode>` before its output."""
    content = rec.get("content")
    m = _RETURNCODE.match(content) if isinstance(content, str) else None
    if m is None:
        return {}
    return {"exit_code": int(m.group(1))}


def load_swe_agent(path: Path, data: Any = None) -> list[SessionLog]:
    path = Path(path)
    data = read_json(path) if data is None else data
    if not isinstance(data, dict) or not isinstance(data.get("history"), list):
        raise SessionLogError(f"{path}: not a SWE-agent trajectory (no history)")
    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    header: dict[str, Any] = {"source": str(path)}
    for key in ("exit_status", "submission"):
        if isinstance(info.get(key), str):
            header[key] = info[key]
    cfg = data.get("replay_config")
    if isinstance(cfg, str):
        try:
            cfg = json.loads(cfg)
        except ValueError:
            cfg = None
    model = cfg.get("agent", {}).get("model", {}).get("name") if isinstance(cfg, dict) else None
    if isinstance(model, str):
        header["model"] = model
    b = SessionBuilder(path, "swe-agent", path.name.removesuffix(".traj"), header)
    marked = False
    previous = None
    for i, rec in enumerate(data["history"]):
        if not isinstance(rec, dict) or not isinstance(rec.get("role"), str):
            b.warn(i + 1, f"history item {i} is not a message, skipped")
            continue
        extra = {k: rec[k] for k in ("message_type", "agent") if isinstance(rec.get(k), str)}
        if rec.get("is_demo"):
            extra["is_demo"] = True
        elif rec["role"] == "user" and previous == "assistant" \
                and rec.get("message_type", "observation") == "observation":
            # text actions: the environment answers a reply in a user message (the task, which SWE-agent
            # labels an observation too, answers none)
            extra["observation"] = True
        previous = rec["role"]
        marked = _first_task(extra, rec, marked)
        if rec["role"] == "tool":
            ids = _ids(rec.get("tool_call_ids")) or ([rec["tool_call_id"]] if rec.get("tool_call_id") else [])
            if len(ids) > 1:
                b.warn(i + 1, f"one observation answers {len(ids)} calls; given to the first, the rest get a pointer")
            text = rec.get("content") if isinstance(rec.get("content"), str) else json.dumps(rec.get("content"))
            b.tool_result(ids[0] if ids else None, text, i + 1, extra)
            for other in ids[1:]:
                b.tool_result(other, f"(output given with call {ids[0]})", i + 1, extra)
            continue
        feed_chat_message(b, rec, i + 1, extra)
    return [b.build()]


def load_mini_swe_agent(path: Path, data: Any = None) -> list[SessionLog]:
    path = Path(path)
    data = read_json(path) if data is None else data
    messages = data.get("messages") if isinstance(data, dict) else data
    if not isinstance(messages, list):
        raise SessionLogError(f"{path}: not a mini-swe-agent trajectory (no messages)")
    info = data.get("info") if isinstance(data, dict) and isinstance(data.get("info"), dict) else {}
    header: dict[str, Any] = {"source": str(path)}
    for key in ("exit_status", "submission", "mini_version"):
        if isinstance(info.get(key), str):
            header[key] = info[key]
    model = info.get("config", {}).get("model", {}).get("model_name") if isinstance(info.get("config"), dict) \
        else None
    if isinstance(model, str):
        header["model"] = model
    sid = str(data.get("instance_id") or path.name.removesuffix(".json").removesuffix(".traj")) \
        if isinstance(data, dict) else path.stem
    b = SessionBuilder(path, "mini-swe-agent", sid, header)
    marked = False
    replied = False
    for i, rec in enumerate(messages):
        if not isinstance(rec, dict) or not isinstance(rec.get("role"), str):
            b.warn(i + 1, f"message {i} is not a chat message, skipped")
            continue
        extra = _returncode(rec)
        if replied and rec["role"] == "user":   # v1 (text): a user message after the first reply is an observation
            extra["observation"] = True
        marked = _first_task(extra, rec, marked)
        turn = feed_chat_message(b, rec, i + 1, extra or None)
        replied = replied or rec["role"] == "assistant"
        extra = rec.get("extra") if isinstance(rec.get("extra"), dict) else {}
        response = extra.get("response")
        if turn is not None and isinstance(response, dict):
            feed_usage(turn, response.get("usage"), i + 1)
            if isinstance(response.get("model"), str):
                turn.set_meta("model", response["model"])
    return [b.build()]
