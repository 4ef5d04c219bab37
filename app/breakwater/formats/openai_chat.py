"""OpenAI chat-completions message arrays: a JSON list, an object with `messages`, and litellm
log records (`{messages, response, ...}`), where `response` is the reply to those messages.

In litellm's non-function-calling mode `messages` is what the model saw (calls as
`<function=...>` text, results as user messages) and `raw_messages` repeats it in
native shape; the former is imported, as the model saw it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from breakwater.core.log.message import content_text
from breakwater.core.log.json_lines import (ArrayItems, NotPlain, SessionLogError, array_items, decode_document,
                                            open_session_file)
from breakwater.core.log.session_log import SessionLog
from breakwater.formats.builder import SessionBuilder, Turn, ref

FORMAT = "openai"


def _count_images(content: Any) -> dict[str, int]:
    n = sum(1 for p in content if isinstance(p, dict) and ref(p.get("type")) in ("image_url", "image", "input_image")) \
        if isinstance(content, list) else 0
    return {"images": n} if n else {}


def feed_usage(turn: Turn | None, usage: Any, line: int) -> None:
    """An OpenAI `usage` object (chat.completion, litellm) as the usage of `turn`."""
    if turn is None or not isinstance(usage, dict):
        return
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    extra = {"cached_tokens": cached} if isinstance(cached, int) and cached else {}
    turn.set_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"), line, **extra)


def feed_chat_message(b: SessionBuilder, rec: Mapping[str, Any], line: int,
                      extra: Mapping[str, Any] | None = None) -> Turn | None:
    """One chat-completions message (with `extra` meta); returns the assistant turn it made, if any."""
    role = ref(rec.get("role"))
    content = rec.get("content")
    text = content_text(content)
    meta: dict[str, Any] = {**_count_images(content), **(extra or {})}
    if role == "assistant":
        turn = b.assistant(line, text, meta)
        reasoning = rec.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            turn.add_meta_text("reasoning", reasoning)
            # a chat-completions history holds what was sent: the reasoning went back with the reply
            turn.set_meta("reasoning_resent", True)
        calls = rec.get("tool_calls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):
                fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                turn.add_call(call.get("id"), str(fn.get("name") or ""), fn.get("arguments", ""), line)
        return turn
    if role == "tool":
        b.tool_result(rec.get("tool_call_id"), text, line, meta, name=rec.get("name"))
    elif role == "system":
        b.system(text, line, meta)
    elif role == "user":
        b.user(text, line, meta)
    elif role in ("developer", "function"):
        b.user(text, line, {**meta, "source_role": role})
    else:  # a framework's own role (mini-swe-agent's `exit` holds the submitted patch): not model input
        b.event("note", line, kind=f"role:{role}", text=text)
    return None


def feed_chat_messages(b: SessionBuilder, messages: Iterable[Any]) -> Turn | None:
    last = None
    for i, rec in enumerate(messages):
        if not isinstance(rec, dict) or not isinstance(rec.get("role"), str):
            b.warn(i + 1, f"item {i} is not a chat message, skipped")
            continue
        turn = feed_chat_message(b, rec, i + 1)
        last = turn or last
    return last


def read_json(path: Path, notes: list[str] | None = None) -> Any:
    """One JSON document (see `decode_document`)."""
    with open_session_file(Path(path)) as fh:
        return decode_document(fh.read(), path, notes)


def read_items(path: Path, notes: list[str] | None = None) -> Any:
    """A document read whole: its items (`ArrayItems`, decoded as they are reached) when it is an array
    msgspec can split, else as `read_json` reads it."""
    with open_session_file(Path(path)) as fh:
        raw = fh.read()
    items = array_items(Path(path), raw)
    return items if items is not None else decode_document(raw, path, notes)


def load_openai_messages(path: Path, data: Any = None, notes: list[str] | None = None) -> SessionLog:
    """`data`: the document already read, or its items (`ArrayItems`), decoded as they are fed."""
    path = Path(path)
    notes = list(notes or ())
    if data is None:
        data = read_items(path, notes)
    if isinstance(data, ArrayItems):
        try:
            return _load_messages(path, data, notes)
        except NotPlain:   # an item the json module reads otherwise: the document as it reads it, from the start
            data = data.whole(notes)
    return _load_messages(path, data, notes)


def _load_messages(path: Path, data: Any, notes: list[str]) -> SessionLog:
    record = data if isinstance(data, dict) else {}
    messages = record.get("messages") if record else data
    if not isinstance(messages, (list, ArrayItems)):
        raise SessionLogError(f"{path}: expected a list of chat messages")
    header: dict[str, Any] = {"source": str(path)}
    if isinstance(record.get("context_window"), int):
        header["window"] = record["context_window"]
    b = SessionBuilder(path, FORMAT, path.stem, header)
    for note in notes:
        b.warn(0, note)
    last = feed_chat_messages(b, messages)
    response = record.get("response")
    if isinstance(response, dict):   # a litellm log: the reply to `messages`
        choices = response.get("choices") if isinstance(response.get("choices"), list) else []
        reply = choices[0].get("message") if choices and isinstance(choices[0], dict) else None
        if isinstance(reply, dict):
            last = feed_chat_message(b, {**reply, "role": "assistant"}, len(messages) + 1)
            b.header.setdefault("model", response.get("model"))
        feed_usage(last, response.get("usage"), len(messages) + 1)
    return b.build()
