"""The OpenAI Chat Completions wire (`POST /v1/chat/completions`): pi's, aider's, OpenHands', mini-swe-agent's.

Its messages are our shape already: one wire message is one message. The system (and developer)
messages are the request's frame: they go back first, as the agent sent them."""

from __future__ import annotations

import json
from typing import Any

from breakwater.core.log.message import Message, ToolCall
from breakwater.proxy.wire import Conversation, Item, Reply, Usage, arguments_text, capped, changed_arguments, loads, \
    part_text, placed

NAME = "chat"
PATH = "/v1/chat/completions"
_FRAME = ("system", "developer")


def _calls(raw: Any) -> tuple[ToolCall, ...]:
    out = []
    for c in raw if isinstance(raw, list) else []:
        if isinstance(c, dict):
            fn = c.get("function") if isinstance(c.get("function"), dict) else {}
            out.append(ToolCall(str(c.get("id") or ""), str(fn.get("name") or ""), arguments_text(fn.get("arguments", ""))))
    return tuple(out)


def read_request(body: dict[str, Any], headers: Any = None) -> Conversation:
    items: list[Item] = []
    system = []
    for i, wm in enumerate(body.get("messages") or []):
        if not isinstance(wm, dict):
            continue
        role = wm.get("role")
        if role in _FRAME:
            system.append(part_text(wm.get("content")))
        elif role == "tool":
            items.append(Item(Message("", "tool", part_text(wm.get("content")), tool_call_id=str(wm.get("tool_call_id") or "")), i))
        elif role == "assistant":
            items.append(Item(Message("", "assistant", part_text(wm.get("content")), _calls(wm.get("tool_calls"))), i))
        else:
            items.append(Item(Message("", "user", part_text(wm.get("content"))), i))
    sid = headers.get("x-session-id") if headers is not None else None
    return Conversation(system="\n\n".join(system), items=items, model=str(body.get("model") or ""),
                        stream=bool(body.get("stream")), agent_session=str(sid) if sid else None,
                        tools=body.get("tools"))


def rebuild(body: dict[str, Any], items: list[Item], view: list[Message]) -> dict[str, Any]:
    """The frame as sent, then `view`'s messages: unchanged ones as the agent sent them, edited ones with
    the new text (an assistant's tool calls kept), a summary as a new user message."""
    wire = body.get("messages") or []
    out = [wm for wm in wire if isinstance(wm, dict) and wm.get("role") in _FRAME]
    for vm, it in placed(view, items):
        if it is None:
            out.append({"role": "assistant" if vm.role == "assistant" else "user", "content": vm.content})
        elif vm.content == it.message.content and vm.tool_calls == it.message.tool_calls:
            out.append(wire[it.origin])
        else:
            wm = {**wire[it.origin], "content": vm.content}
            changed = changed_arguments(vm.tool_calls, it.message.tool_calls)
            if changed and isinstance(wm.get("tool_calls"), list):
                wm["tool_calls"] = [{**c, "function": {**c["function"], "arguments": changed[c.get("id")]}}
                                    if isinstance(c, dict) and c.get("id") in changed and isinstance(c.get("function"), dict)
                                    else c for c in wm["tool_calls"]]
            out.append(wm)
    return {**body, "messages": out}


def _usage(u: dict[str, Any]) -> Usage:
    prompt, output = u.get("prompt_tokens"), u.get("completion_tokens")
    details = u.get("prompt_tokens_details") if isinstance(u.get("prompt_tokens_details"), dict) else {}
    cached = details.get("cached_tokens")
    cached = cached if isinstance(cached, int) else None
    written = details.get("cache_write_tokens") if isinstance(details.get("cache_write_tokens"), int) else None
    uncached = prompt - (cached or 0) - (written or 0) if isinstance(prompt, int) else None
    return Usage(uncached, written, cached, output if isinstance(output, int) else None, dict(u))


def read_reply(obj: Any) -> Reply:
    if not isinstance(obj, dict):
        return Reply()
    choices = obj.get("choices") if isinstance(obj.get("choices"), list) else []
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    msg = first.get("message") if isinstance(first.get("message"), dict) else {}
    usage = _usage(obj["usage"]) if isinstance(obj.get("usage"), dict) else None
    return Reply(capped(part_text(msg.get("content"))), list(_calls(msg.get("tool_calls"))), usage, obj.get("model"),
                 first.get("finish_reason"))


class StreamReader:
    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: dict[str, Any] | None = None
        self.model: str | None = None
        self.stop: str | None = None
        self.size = 0

    def feed(self, event: str | None, data: str) -> None:
        if data.strip() == "[DONE]":
            return
        obj = loads(data)
        if not isinstance(obj, dict):
            return
        self.model = obj.get("model") or self.model
        if isinstance(obj.get("usage"), dict):
            self.usage = obj["usage"]
        for choice in obj.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            self.stop = choice.get("finish_reason") or self.stop
            delta = choice.get("delta") if isinstance(choice.get("delta"), dict) else {}
            if self.size > (1 << 22):
                continue
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
                self.size += len(delta["content"])
            for c in delta.get("tool_calls") or []:
                if not isinstance(c, dict):
                    continue
                call = self.calls.setdefault(c.get("index", len(self.calls)), {"id": "", "name": "", "args": []})
                fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                call["id"] = c.get("id") or call["id"]
                call["name"] = fn.get("name") or call["name"]
                if isinstance(fn.get("arguments"), str):
                    call["args"].append(fn["arguments"])
                    self.size += len(fn["arguments"])

    def reply(self) -> Reply:
        calls = [ToolCall(str(c["id"]), str(c["name"]), "".join(c["args"])) for _, c in sorted(self.calls.items())]
        return Reply(capped("".join(self.text)), calls, _usage(self.usage) if self.usage else None, self.model, self.stop)


def error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "proxy_error", "code": None}}).encode()
