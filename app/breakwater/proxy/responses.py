"""The OpenAI Responses wire (`POST /v1/responses`): Codex's (0.171 speaks only this one).

A request's `input` is a list of items. In our shape: a user message item is a user message; an
assistant's message items and the (custom) function calls after them are one assistant message, with
the reasoning items before them kept only in the request (put back as they were); a call's output is a
tool message. `instructions` and the developer and system message items are the request's frame: they
go back first, as the agent sent them."""

from __future__ import annotations

import json
from typing import Any

from breakwater.core.log.message import Message, ToolCall
from breakwater.proxy.wire import Conversation, Item, Reply, Usage, arguments_text, capped, changed_arguments, loads, \
    part_text, placed

NAME = "responses"
PATH = "/v1/responses"
_FRAME_ROLES = ("developer", "system")
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def _is_frame(it: Any) -> bool:
    return isinstance(it, dict) and it.get("type", "message") == "message" and it.get("role") in _FRAME_ROLES


def _call(it: dict[str, Any]) -> ToolCall:
    args = it.get("arguments", it.get("input", it.get("action", "")))
    return ToolCall(str(it.get("call_id") or it.get("id") or ""), str(it.get("name") or it.get("type")), arguments_text(args))


def read_request(body: dict[str, Any], headers: Any = None) -> Conversation:
    raw = body.get("input")
    wire = raw if isinstance(raw, list) else [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else []
    items: list[Item] = []
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    group: list[int] = []        # an assistant turn being gathered: reasoning, messages, calls
    text: list[str] = []
    calls: list[ToolCall] = []

    def close() -> None:
        if text or calls:
            items.append(Item(Message("", "assistant", "\n".join(text), tuple(calls)), list(group)))
            group.clear()
            text.clear()
            calls.clear()

    for i, it in enumerate(wire):
        if not isinstance(it, dict):
            continue
        kind, role = it.get("type", "message"), it.get("role")
        if _is_frame(it):
            system.append(part_text(it.get("content")))
        elif kind == "reasoning":
            group.append(i)
        elif kind == "message" and role == "assistant":
            if calls:
                close()
            group.append(i)
            text.append(part_text(it.get("content")))
        elif kind in _CALLS:
            group.append(i)
            calls.append(_call(it))
        elif kind in _OUTPUTS:
            close()
            out = it.get("output")
            items.append(Item(Message("", "tool", part_text(out.get("content") if isinstance(out, dict) else out),
                                      tool_call_id=str(it.get("call_id") or "")), [i]))
        else:
            close()
            items.append(Item(Message("", "user", part_text(it.get("content"))), [i]))
    close()
    sid = None
    if headers is not None:
        sid = headers.get("session_id") or headers.get("conversation_id") or headers.get("session-id")
    sid = sid or (body.get("prompt_cache_key") if isinstance(body.get("prompt_cache_key"), str) else None)
    return Conversation(system="\n\n".join(system), items=items, model=str(body.get("model") or ""),
                        stream=bool(body.get("stream")), agent_session=str(sid) if sid else None,
                        tools=body.get("tools"))


def rebuild(body: dict[str, Any], items: list[Item], view: list[Message]) -> dict[str, Any]:
    raw = body.get("input")
    if not isinstance(raw, list):
        raw = [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else []
    out = [it for it in raw if _is_frame(it)]
    for vm, it in placed(view, items):
        if it is None:
            out.append({"type": "message", "role": "assistant" if vm.role == "assistant" else "user",
                        "content": [{"type": "output_text" if vm.role == "assistant" else "input_text", "text": vm.content}]})
            continue
        originals = [raw[i] for i in it.origin]
        if vm.content == it.message.content and vm.tool_calls == it.message.tool_calls:
            out.extend(originals)
        elif vm.role == "tool":
            out.append({**originals[0], "output": vm.content})
        elif vm.role == "assistant":
            out.extend(o for o in originals if o.get("type") == "reasoning")
            if vm.content:
                out.append({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": vm.content}]})
            changed = changed_arguments(vm.tool_calls, it.message.tool_calls)
            out.extend({**o, "arguments": changed[o.get("call_id")]} if o.get("type") == "function_call"
                       and o.get("call_id") in changed else o for o in originals if o.get("type") in _CALLS)
        else:
            out.append({"type": "message", "role": "user", "content": [{"type": "input_text", "text": vm.content}]})
    return {**body, "input": out}


def _usage(u: dict[str, Any]) -> Usage:
    prompt, output = u.get("input_tokens"), u.get("output_tokens")
    details = u.get("input_tokens_details") if isinstance(u.get("input_tokens_details"), dict) else {}
    cached = details.get("cached_tokens") if isinstance(details.get("cached_tokens"), int) else None
    uncached = prompt - (cached or 0) if isinstance(prompt, int) else None
    return Usage(uncached, None, cached, output if isinstance(output, int) else None, dict(u))


def read_reply(obj: Any) -> Reply:
    if not isinstance(obj, dict):
        return Reply()
    text, calls = [], []
    for it in obj.get("output") or []:
        if not isinstance(it, dict):
            continue
        if it.get("type") == "message":
            text.append(part_text(it.get("content")))
        elif it.get("type") in _CALLS:
            calls.append(_call(it))
    usage = _usage(obj["usage"]) if isinstance(obj.get("usage"), dict) else None
    return Reply(capped("\n".join(text)), calls, usage, obj.get("model"), obj.get("status"))


class StreamReader:
    """The reply is the response the stream's last event (`response.completed`, `.incomplete`, `.failed`)
    carries whole."""

    def __init__(self) -> None:
        self.final: dict[str, Any] | None = None

    def feed(self, event: str | None, data: str) -> None:
        if not (event or "").startswith("response.") or event.removeprefix("response.") not in (
                "completed", "incomplete", "failed"):
            return
        obj = loads(data)
        if isinstance(obj, dict) and isinstance(obj.get("response"), dict):
            self.final = obj["response"]

    def reply(self) -> Reply:
        return read_reply(self.final)


def error_body(message: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "proxy_error", "code": None}}).encode()
