"""What a chat-completions request must look like before a provider accepts it.

`check_request` returns the problems it finds (an empty list means the request is valid). The
fake server runs it on every request it receives, so any test that drives the agent against the
fake server also proves the agent never sends a request a real provider would reject: orphaned
tool results, unanswered tool calls, a system message out of place, a request over the window,
or memory injected into the wrong prompt layer (SPEC §4, §6, §7).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping

ROLES = ("system", "user", "assistant", "tool")

# Content part types the chat-completions API accepts, per role.
PART_TYPES = {
    "system": {"text"},
    "user": {"text", "image_url", "input_audio", "file"},
    "assistant": {"text", "refusal"},
    "tool": {"text"},
}

PROJECT_HISTORY = "[Project History]"
RETRIEVED_MEMORY = "[Retrieved Memory]"
# Block headers count only at the start of a line, so a tool result that merely quotes the
# marker mid-line (source code, a grep hit) is not taken for an injected block.
_PROJECT_HISTORY_RE = re.compile(r"(?m)^" + re.escape(PROJECT_HISTORY))
_RETRIEVED_MEMORY_RE = re.compile(r"(?m)^" + re.escape(RETRIEVED_MEMORY))

Counter = Callable[[list[Mapping[str, Any]]], int]


def estimate_text(text: str) -> int:
    """SPEC §2 heuristic for one text: ascii_chars // 4 + non_ascii_chars // 2 + 1."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return ascii_chars // 4 + (len(text) - ascii_chars) // 2 + 1


def heuristic_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    """SPEC §2 heuristic for a message list: text + 4 per message, name + arguments + 10 per call."""
    total = 0
    for message in messages:
        total += estimate_text(message_text(message.get("content"))) + 4
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                function = {}
            total += estimate_text(str(function.get("name") or ""))
            total += estimate_text(str(function.get("arguments") or "")) + 10
    return total


def message_text(content: Any) -> str:
    """The text of a content value: a string, null, or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text") or part.get("refusal") or "") for part in content if isinstance(part, Mapping)
        )
    return str(content)


def check_request(
    body: Any,
    window: int | None = None,
    counter: Counter | None = None,
    *,
    static_prefix: str | None = None,
    headers: Mapping[str, str] | None = None,
    api_key: str | None = None,
) -> list[str]:
    """Problems with one chat-completions request body; empty when it is valid.

    window: the model's context window in tokens; the request must fit in it by `counter`
        (default: the SPEC §2 heuristic).
    static_prefix: the static prompt layer the system message must start with.
    headers: the HTTP headers (case-insensitive names) — the Authorization header must carry a
        bearer key, equal to `api_key` when that is given.
    """
    if not isinstance(body, Mapping):
        return [f"body is not a JSON object: {type(body).__name__}"]
    problems: list[str] = []
    if headers is not None:
        problems += _check_auth(headers, api_key)
    if not body.get("model"):
        problems.append("model is missing")
    if body.get("stream_options") is not None and not body.get("stream"):
        problems.append("stream_options is only allowed when stream is true")
    if body.get("tool_choice") is not None and not body.get("tools"):
        problems.append("tool_choice is given without tools")
    problems += _check_tools(body.get("tools"))

    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        problems.append("messages must be a non-empty list")
        return problems
    if not all(isinstance(m, Mapping) for m in messages):
        problems.append("every message must be a JSON object")
        return problems

    for i, message in enumerate(messages):
        problems += _check_message(i, message)
    problems += _check_tool_pairing(messages)
    problems += _check_layers(messages, static_prefix)
    if window is not None:
        tokens = (counter or heuristic_tokens)(messages)
        if tokens > window:
            problems.append(f"request is {tokens} tokens, over the window of {window}")
    return problems


def _check_auth(headers: Mapping[str, str], api_key: str | None) -> list[str]:
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("authorization", "")
    if not value.startswith("Bearer ") or not value[len("Bearer "):].strip():
        return ["Authorization header with a bearer key is missing"]
    if api_key is not None and value != f"Bearer {api_key}":
        return ["Authorization header does not carry the configured key"]
    return []


def _check_tools(tools: Any) -> list[str]:
    if tools is None:
        return []
    if not isinstance(tools, list) or not tools:
        return ["tools must be a non-empty list when given"]
    problems = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(tool, Mapping) or tool.get("type") != "function" or not isinstance(function, Mapping):
            problems.append(f"tools[{i}] is not a function tool")
        elif not function.get("name"):
            problems.append(f"tools[{i}] has no function name")
    return problems


def _check_message(i: int, message: Mapping[str, Any]) -> list[str]:
    role = message.get("role")
    if role not in ROLES:
        return [f"messages[{i}] has invalid role {role!r}"]
    problems = []
    if role == "system" and i != 0:
        problems.append(f"messages[{i}] is a system message but not the first message")

    content = message.get("content")
    tool_calls = message.get("tool_calls")
    if content is None:
        if role != "assistant" or not tool_calls:
            problems.append(f"messages[{i}] ({role}) has null content")
    elif isinstance(content, list):
        if not content:
            problems.append(f"messages[{i}] ({role}) has an empty content part list")
        for j, part in enumerate(content):
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind not in PART_TYPES[role]:
                problems.append(f"messages[{i}] ({role}) content part {j} has invalid type {kind!r}")
            elif kind == "text" and not isinstance(part.get("text"), str):
                problems.append(f"messages[{i}] ({role}) content part {j} has no text string")
    elif not isinstance(content, str):
        problems.append(f"messages[{i}] ({role}) content is a {type(content).__name__}, not a string or part list")

    if tool_calls is not None:
        if role != "assistant":
            problems.append(f"messages[{i}] ({role}) carries tool_calls")
        elif not isinstance(tool_calls, list) or not tool_calls:
            problems.append(f"messages[{i}] has an empty tool_calls list")
        else:
            for j, call in enumerate(tool_calls):
                problems += _check_call(i, j, call)
    if role == "tool" and not (isinstance(message.get("tool_call_id"), str) and message.get("tool_call_id")):
        problems.append(f"messages[{i}] (tool) has no tool_call_id")
    return problems


def _check_call(i: int, j: int, call: Any) -> list[str]:
    where = f"messages[{i}].tool_calls[{j}]"
    if not isinstance(call, Mapping):
        return [f"{where} is not an object"]
    problems = []
    if not isinstance(call.get("id"), str) or not call.get("id"):
        problems.append(f"{where} has no id")
    if call.get("type") != "function":
        problems.append(f"{where} has type {call.get('type')!r}, not 'function'")
    function = call.get("function")
    if not isinstance(function, Mapping) or not function.get("name"):
        problems.append(f"{where} has no function name")
    elif not isinstance(function.get("arguments"), str):
        problems.append(f"{where} arguments are not a JSON string")
    return problems


def _check_tool_pairing(messages: list[Mapping[str, Any]]) -> list[str]:
    """Each call answered by exactly one tool message before the next user/assistant message."""
    problems = []
    seen_ids: set[str] = set()
    pending: dict[str, int] = {}  # call id -> index of the assistant message that made it
    answered: set[str] = set()

    def close_turn() -> None:
        for call_id, at in pending.items():
            problems.append(f"tool call {call_id!r} of messages[{at}] is never answered by a tool message")
        pending.clear()
        answered.clear()

    for i, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id in pending:
                del pending[call_id]
                answered.add(call_id)
            elif call_id in answered:
                problems.append(f"messages[{i}] answers tool call {call_id!r} a second time")
            else:
                problems.append(f"messages[{i}] is a tool result for {call_id!r} with no matching preceding call")
            continue
        close_turn()
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                call_id = call.get("id") if isinstance(call, Mapping) else None
                if not isinstance(call_id, str) or not call_id:
                    continue
                if call_id in seen_ids:
                    problems.append(f"tool call id {call_id!r} in messages[{i}] is not unique")
                seen_ids.add(call_id)
                pending[call_id] = i
    close_turn()
    return problems


def _check_layers(messages: list[Mapping[str, Any]], static_prefix: str | None) -> list[str]:
    """Static layer first; project history inside the system message, before retrieved memory."""
    problems = []
    has_system = messages[0].get("role") == "system"
    system_text = message_text(messages[0].get("content")) if has_system else ""
    if static_prefix is not None:
        if not has_system:
            problems.append("there is no system message carrying the static prompt layer")
        elif not system_text.startswith(static_prefix):
            problems.append("the system message does not start with the static prompt layer")

    if _RETRIEVED_MEMORY_RE.search(system_text):
        problems.append(f"a {RETRIEVED_MEMORY} block is inside the system message")
    history_at = memory_at = None  # (message index, offset) of each block's first header
    for i, message in enumerate(messages):
        text = message_text(message.get("content"))
        history = _PROJECT_HISTORY_RE.search(text)
        if history:
            history_at = history_at or (i, history.start())
            if i != 0 or not has_system:
                problems.append(f"the {PROJECT_HISTORY} block is in messages[{i}], not in the system message")
        memory = _RETRIEVED_MEMORY_RE.search(text)
        if memory and memory_at is None:
            memory_at = (i, memory.start())
    if history_at is not None and memory_at is not None and memory_at < history_at:
        problems.append(f"a {RETRIEVED_MEMORY} block comes before the {PROJECT_HISTORY} block")
    return problems
