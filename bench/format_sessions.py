"""One synthetic session written in every format Breakwater reads, as each agent writes it.

The benchmarks load the same conversation in each format and as native JSONL (what `breakwater
import` writes from it), so a format's figure beside native's is the cost of the format alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable

from breakwater.core.log.message import Message

TS = "2026-12-01T10:00:00.000Z"


def _chat(m: Message) -> dict[str, Any]:
    rec: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        rec["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                             for c in m.tool_calls]
    if m.tool_call_id:
        rec["tool_call_id"] = m.tool_call_id
    return rec


def _dump(path: Path, doc: Any) -> Path:
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    return path


def _lines(path: Path, records: Iterable[dict[str, Any]]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return path


def openai(msgs: list[Message], path: Path) -> Path:
    return _dump(path, [_chat(m) for m in msgs])


def litellm(msgs: list[Message], path: Path) -> Path:
    *sent, reply = msgs
    return _dump(path, {"messages": [_chat(m) for m in sent], "model": "gpt-4o",
                        "response": {"model": "gpt-4o", "choices": [{"message": _chat(reply)}],
                                     "usage": {"prompt_tokens": 1000, "completion_tokens": 10}}})


def swe_agent(msgs: list[Message], path: Path) -> Path:
    history = []
    for m in msgs:
        rec = _chat(m)
        if m.tool_call_id:
            rec["tool_call_ids"] = [rec.pop("tool_call_id")]
        history.append({**rec, "agent": "main", "message_type": "observation" if m.role == "tool" else "action"})
    return _dump(path, {"trajectory": [], "history": history, "info": {"exit_status": "submitted"}})


def mini_swe_agent(msgs: list[Message], path: Path) -> Path:
    return _dump(path, {"info": {"mini_version": "1.9.0", "exit_status": "Submitted"},
                        "messages": [_chat(m) for m in msgs], "trajectory_format": "mini-swe-agent-1"})


def claude_code(msgs: list[Message], path: Path) -> Path:
    def records():
        parent = None
        for m in msgs:
            if m.role == "system":
                continue
            uuid = f"u-{m.id}"
            base = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": "/src/app",
                    "sessionId": "bench-session", "version": "2.0.55", "uuid": uuid, "timestamp": TS}
            parent = uuid
            if m.role == "assistant":
                blocks = [{"type": "text", "text": m.content}] if m.content else []
                blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": json.loads(c.arguments)}
                           for c in m.tool_calls]
                yield {**base, "type": "assistant", "message": {"id": f"msg_{m.id}", "role": "assistant",
                                                                "model": "claude-sonnet-4-5", "content": blocks}}
            elif m.role == "tool":
                yield {**base, "type": "user", "message": {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}]}}
            else:
                yield {**base, "type": "user", "message": {"role": "user", "content": m.content}}
    return _lines(path, records())


def codex(msgs: list[Message], path: Path) -> Path:
    def records():
        yield {"timestamp": TS, "type": "session_meta", "payload": {"id": "bench-session", "timestamp": TS,
                                                                    "cwd": "/src/app", "cli_version": "0.46.0"}}
        for m in msgs:
            if m.role == "tool":
                yield {"timestamp": TS, "type": "response_item", "payload": {
                    "type": "function_call_output", "call_id": m.tool_call_id, "output": m.content}}
                continue
            kind = "output_text" if m.role == "assistant" else "input_text"
            role = "developer" if m.role == "system" else m.role
            if m.content or not m.tool_calls:
                yield {"timestamp": TS, "type": "response_item", "payload": {
                    "type": "message", "role": role, "content": [{"type": kind, "text": m.content}]}}
            for c in m.tool_calls:
                yield {"timestamp": TS, "type": "response_item", "payload": {
                    "type": "function_call", "name": c.name, "arguments": c.arguments, "call_id": c.id}}
    return _lines(path, records())


def pi(msgs: list[Message], path: Path) -> Path:
    def records():
        yield {"type": "session", "version": 3, "id": "bench-session", "timestamp": TS, "cwd": "/src/app"}
        parent = None
        for m in msgs:
            if m.role == "system":
                continue
            base = {"type": "message", "id": m.id, "parentId": parent, "timestamp": TS}
            parent = m.id
            if m.role == "assistant":
                blocks = [{"type": "text", "text": m.content}] if m.content else []
                blocks += [{"type": "toolCall", "id": c.id, "name": c.name, "arguments": json.loads(c.arguments)}
                           for c in m.tool_calls]
                yield {**base, "message": {"role": "assistant", "content": blocks, "model": "claude-sonnet-4-5",
                                           "usage": {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0},
                                           "stopReason": "toolUse" if m.tool_calls else "stop"}}
            elif m.role == "tool":
                yield {**base, "message": {"role": "toolResult", "toolCallId": m.tool_call_id, "toolName": "bash",
                                           "content": [{"type": "text", "text": m.content}], "isError": False}}
            else:
                yield {**base, "message": {"role": "user", "content": [{"type": "text", "text": m.content}]}}
    return _lines(path, records())


def openhands(msgs: list[Message], path: Path) -> Path:
    """OpenHands V0 events (a JSON list), each tool call an action rebuilt from its model response."""
    events: list[dict[str, Any]] = []
    for m in msgs:
        eid = len(events)
        if m.role in ("system", "user") or (m.role == "assistant" and not m.tool_calls):
            source = "agent" if m.role != "user" else "user"
            events.append({"id": eid, "timestamp": TS, "source": source, "action": m.role if m.role == "system"
                           else "message", "args": {"content": m.content}, "message": m.content})
        elif m.role == "assistant":
            response = {"id": f"resp-{m.id}", "model": "gpt-4o", "choices": [{"message": _chat(m)}]}
            for c in m.tool_calls:
                events.append({"id": len(events), "timestamp": TS, "source": "agent", "action": "run",
                               "args": {**json.loads(c.arguments), "thought": ""},
                               "tool_call_metadata": {"function_name": c.name, "tool_call_id": c.id,
                                                      "model_response": response}})
        else:
            events.append({"id": eid, "timestamp": TS, "source": "agent", "observation": "run",
                           "content": m.content, "extras": {"metadata": {"exit_code": 0}},
                           "tool_call_metadata": {"function_name": "bash", "tool_call_id": m.tool_call_id}})
    return _dump(path, events)


WRITERS: dict[str, tuple[str, Callable[[list[Message], Path], Path]]] = {
    "openai": (".json", openai), "litellm": (".json", litellm), "swe-agent": (".traj", swe_agent),
    "mini-swe-agent": (".traj.json", mini_swe_agent), "claude-code": (".jsonl", claude_code),
    "codex": (".jsonl", codex), "pi": (".jsonl", pi), "openhands": (".json", openhands),
}
