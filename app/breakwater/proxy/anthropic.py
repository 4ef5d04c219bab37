"""The Anthropic Messages wire (`POST /v1/messages`): Claude Code's.

A request's `messages` alternate user and assistant, each content a string or a list of blocks. In our
shape a user message's `tool_result` blocks are tool messages of their own (in order, before its other
blocks, which are one user message); an assistant message is one message, its `tool_use` blocks its
tool calls, its thinking blocks kept only in the request (put back as they were: their signatures must
not change)."""

from __future__ import annotations

import json
import re
from typing import Any

from breakwater.core.log.message import Message, ToolCall
from breakwater.proxy.wire import Conversation, Item, Reply, Usage, arguments_text, capped, changed_arguments, loads, \
    part_text, placed

NAME = "anthropic"
PATH = "/v1/messages"
_SESSION = re.compile(r"session_([0-9A-Za-z-]{8,})")
_KEEP_ON_EDIT = ("thinking", "redacted_thinking")


def _blocks(content: Any) -> list[Any]:
    if isinstance(content, list):
        return content
    return [{"type": "text", "text": content}] if isinstance(content, str) else []


def _agent_session(body: dict[str, Any], headers: Any) -> str | None:
    sid = headers.get("x-claude-code-session-id") if headers is not None else None
    if sid:
        return str(sid)
    user = (body.get("metadata") or {}).get("user_id") if isinstance(body.get("metadata"), dict) else None
    if isinstance(user, str):
        data = loads(user) if user.startswith("{") else None
        if isinstance(data, dict) and isinstance(data.get("session_id"), str):
            return data["session_id"]
        m = _SESSION.search(user)
        if m:
            return m.group(1)
    return None


def read_request(body: dict[str, Any], headers: Any = None) -> Conversation:
    items: list[Item] = []
    for i, wm in enumerate(body.get("messages") or []):
        if not isinstance(wm, dict):
            continue
        role, content = wm.get("role"), wm.get("content")
        if role == "assistant":
            blocks = _blocks(content)
            text = "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            calls = tuple(ToolCall(str(b.get("id") or ""), str(b.get("name") or ""), arguments_text(b.get("input", {})))
                          for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use")
            items.append(Item(Message("", "assistant", text, calls), (i, None)))
            continue
        if not isinstance(content, list):
            items.append(Item(Message("", "user", part_text(content)), (i, None)))
            continue
        others: list[int] = []
        for j, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                items.append(Item(Message("", "tool", part_text(block.get("content")),
                                          tool_call_id=str(block.get("tool_use_id") or "")), (i, [j])))
            else:
                others.append(j)
        if others:
            items.append(Item(Message("", "user", part_text([content[j] for j in others])), (i, others)))
    system = body.get("system")
    return Conversation(system=part_text(system), items=items, model=str(body.get("model") or ""),
                        stream=bool(body.get("stream")), agent_session=_agent_session(body, headers),
                        tools=body.get("tools"))


def rebuild(body: dict[str, Any], items: list[Item], view: list[Message]) -> dict[str, Any]:
    """The request with `view`'s messages in place of the agent's: a message the pipeline left as it
    was goes back block for block; an edited one keeps its blocks' kinds and ids with the new text; a
    summary is a new user text block. Neighbours of one role become one message, as the wire wants."""
    wire = body.get("messages") or []
    out: list[dict[str, Any]] = []

    def add(role: str, blocks: list[Any]) -> None:
        if not blocks:
            return
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": list(blocks)})

    for vm, it in placed(view, items):
        if it is None:
            add("assistant" if vm.role == "assistant" else "user", [{"type": "text", "text": vm.content}])
            continue
        i, picks = it.origin
        blocks = _blocks(wire[i].get("content"))
        chosen = blocks if picks is None else [blocks[j] for j in picks]
        same = vm.content == it.message.content and vm.tool_calls == it.message.tool_calls
        if vm.role == "assistant":
            if not same:
                changed = changed_arguments(vm.tool_calls, it.message.tool_calls)
                chosen = ([b for b in chosen if isinstance(b, dict) and b.get("type") in _KEEP_ON_EDIT]
                          + ([{"type": "text", "text": vm.content}] if vm.content else [])
                          + [_with_input(b, changed) for b in chosen if isinstance(b, dict) and b.get("type") == "tool_use"])
            add("assistant", chosen)
        elif vm.role == "tool":
            add("user", chosen if same else [{**chosen[0], "content": vm.content}])
        else:
            if not same:
                marks = [b["cache_control"] for b in chosen if isinstance(b, dict) and "cache_control" in b]
                block: dict[str, Any] = {"type": "text", "text": vm.content}
                if marks:
                    block["cache_control"] = marks[-1]
                chosen = [block]
            add("user", chosen)
    return {**body, "messages": out}


def _with_input(block: dict[str, Any], changed: dict[str, str]) -> dict[str, Any]:
    """A tool_use block with the input the view gives its call (an object; else as the agent sent it)."""
    new = loads(changed[block.get("id")]) if block.get("id") in changed else None
    return {**block, "input": new} if isinstance(new, dict) else block


def _usage(u: dict[str, Any]) -> Usage:
    def num(key: str) -> int | None:
        v = u.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return Usage(num("input_tokens"), num("cache_creation_input_tokens"), num("cache_read_input_tokens"),
                 num("output_tokens"), dict(u))


def read_reply(obj: Any) -> Reply:
    if not isinstance(obj, dict):
        return Reply()
    blocks = obj.get("content") if isinstance(obj.get("content"), list) else []
    text = "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    calls = [ToolCall(str(b.get("id") or ""), str(b.get("name") or ""), arguments_text(b.get("input", {})))
             for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
    usage = _usage(obj["usage"]) if isinstance(obj.get("usage"), dict) else None
    return Reply(capped(text), calls, usage, obj.get("model"), obj.get("stop_reason"))


class StreamReader:
    """The reply assembled from the stream's events, as they pass through."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] = {}
        self.model: str | None = None
        self.stop: str | None = None
        self.size = 0

    def feed(self, event: str | None, data: str) -> None:
        obj = loads(data)
        if not isinstance(obj, dict):
            return
        kind = obj.get("type")
        if kind == "message_start" and isinstance(obj.get("message"), dict):
            msg = obj["message"]
            self.model = msg.get("model")
            if isinstance(msg.get("usage"), dict):
                self.usage.update(msg["usage"])
        elif kind == "content_block_start" and isinstance(obj.get("content_block"), dict):
            block = obj["content_block"]
            self.blocks[obj.get("index", len(self.blocks))] = {"type": block.get("type"), "id": block.get("id"),
                                                               "name": block.get("name"), "text": [], "json": []}
        elif kind == "content_block_delta" and isinstance(obj.get("delta"), dict):
            block = self.blocks.get(obj.get("index"))
            delta = obj["delta"]
            if block is None or self.size > (1 << 22):
                return
            if delta.get("type") == "text_delta" and isinstance(delta.get("text"), str):
                block["text"].append(delta["text"])
                self.size += len(delta["text"])
            elif delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
                block["json"].append(delta["partial_json"])
                self.size += len(delta["partial_json"])
        elif kind == "message_delta":
            if isinstance(obj.get("usage"), dict):
                self.usage.update({k: v for k, v in obj["usage"].items() if v is not None})
            delta = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
            self.stop = delta.get("stop_reason") or self.stop

    def reply(self) -> Reply:
        text, calls = [], []
        for _, b in sorted(self.blocks.items()):
            if b["type"] == "text":
                text.append("".join(b["text"]))
            elif b["type"] == "tool_use":
                raw = "".join(b["json"]) or "{}"
                parsed = loads(raw)
                calls.append(ToolCall(str(b["id"] or ""), str(b["name"] or ""),
                                      arguments_text(parsed) if parsed is not None else raw))
        return Reply(capped("\n".join(text)), calls, _usage(self.usage) if self.usage else None, self.model, self.stop)


def error_body(message: str) -> bytes:
    return json.dumps({"type": "error", "error": {"type": "api_error", "message": message}}).encode()
