"""The message: one entry of a chat-completions conversation, plus a stable id."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from breakwater.core.log.text_cache import TextCache

ROLES = ("system", "user", "assistant", "tool")
_ROLE = {r: r for r in ROLES}
MAX_TURN = 10**9  # a turn number beyond any real session: the field is garbage


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    # the JSON string exactly as the model produced it; rewritten only in what a request sends (a
    # shaped request cuts an over-long one, a policy clearing far tool inputs sends "{}")
    arguments: str

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_api(cls, data: Mapping[str, Any], problems: list[str] | None = None, where: str = "tool call") -> "ToolCall":
        """Read a chat-completions tool call; a field of the wrong type is defaulted and, when
        `problems` is given, described there."""
        fn = data.get("function")
        if fn is None:
            fn = data  # the flat shape some exporters write: {"id", "name", "arguments"}
        elif not isinstance(fn, dict):
            _note(problems, f"{where}: function is {_kind(fn)}, not an object; read as its name")
            fn = {"name": fn if isinstance(fn, str) else ""}
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = _json_text(args)
        return cls(id=_text_field(data.get("id"), f"{where}: id", problems),
                   name=_text_field(fn.get("name"), f"{where}: name", problems), arguments=args)


# Not frozen: a frozen dataclass sets each field through object.__setattr__, which made
# constructing one four times slower, and a session builds millions (loading, every stage's
# with_content). It is a value all the same: nothing assigns to a Message once it is built
# (the property tests check the log is never modified); derive a new one instead.
@dataclass(slots=True, unsafe_hash=True)
class Message:
    """A message in chat-completions shape.

    `id` is stable across replays; `turn` is the number of the request whose
    history first contained it (0 for the system prompt); `meta` holds
    timestamps, usage, and what tier 1 did to a tool result at the source.
    """

    id: str
    role: str
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    turn: int = 0
    meta: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    def to_api(self) -> dict[str, Any]:
        """Exactly what goes over the wire for this message."""
        out: dict[str, Any] = {"role": self.role}
        # a tool-only assistant message carries "" rather than null: OpenAI, vLLM and Ollama accept
        # both, llama.cpp's server rejects null
        out["content"] = self.content
        if self.role == "assistant" and self.tool_calls:
            out["tool_calls"] = [tc.to_api() for tc in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id or ""
        return out

    def to_record(self) -> dict[str, Any]:
        """The native session-log line for this message."""
        rec: dict[str, Any] = {"type": "message", "id": self.id, "turn": self.turn, "role": self.role,
                               "content": self.content}
        if self.tool_calls:
            rec["tool_calls"] = [tc.to_api() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            rec["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            rec["name"] = self.name
        if self.meta:
            rec["meta"] = dict(self.meta)
        return rec

    @classmethod
    def from_record(cls, rec: Mapping[str, Any], fallback_id: str = "", problems: list[str] | None = None,
                    default_turn: int = 0) -> "Message":
        """Read a message record. Never raises on a field of the wrong type: it is defaulted
        (a missing or unusable `turn` becomes `default_turn`) and, when `problems` is given,
        described there in a few words."""
        get = rec.get
        role = get("role")
        if type(role) is not str:
            _note(problems, f"role is {_kind(role)}, not a string")
            role = "" if role is None else str(role)
        else:
            role = _ROLE.get(role, role)  # one shared string per role, not one per line
        content = get("content")
        if type(content) is not str:
            try:
                content = content_text(content)
            except (ValueError, RecursionError):
                _note(problems, "content could not be read, left empty")
                content = ""
        calls = get("tool_calls")
        if not calls:
            calls = ()
        elif type(calls) is list:
            parsed = []
            for k, c in enumerate(calls):
                if isinstance(c, dict):
                    parsed.append(ToolCall.from_api(c, problems, f"tool_calls[{k}]"))
                else:
                    _note(problems, f"tool_calls[{k}] is {_kind(c)}, not an object; ignored")
            calls = tuple(parsed)
        else:
            _note(problems, f"tool_calls is {_kind(calls)}, not a list; ignored")
            calls = ()
        mid = get("id")
        if type(mid) is not str or not mid:
            mid = _text_field(mid, "id", problems) or fallback_id
        turn = get("turn")
        if type(turn) is float and turn.is_integer():
            turn = int(turn)
        if type(turn) is not int or not 0 <= turn <= MAX_TURN:
            if turn is not None:
                _note(problems, f"turn {short_value(turn)} is not a turn number, defaulted to {default_turn}")
            turn = default_turn
        meta = get("meta")
        if meta is not None and type(meta) is not dict:
            _note(problems, f"meta is {_kind(meta)}, not an object; ignored")
            meta = None
        call_id, name = get("tool_call_id"), get("name")
        return cls(mid, role, content, calls,
                   call_id if call_id is None or type(call_id) is str else _text_field(call_id, "tool_call_id", problems),
                   name if name is None or type(name) is str else _text_field(name, "name", problems),
                   turn, meta or None)

    @property
    def is_observation(self) -> bool:
        """What the environment answered: a tool result, or the text-mode observation an agent without
        tool calls (SWE-agent's text actions, mini-swe-agent v1) sent back in a user message, which its
        reader marks `observation` in meta. Snip and masking compact both alike; the role stays as sent."""
        return self.role == "tool" or (self.role == "user" and self.meta is not None
                                       and self.meta.get("observation") is True)

    @property
    def resent_reasoning(self) -> str:
        """Reasoning the agent put back into its requests with this reply (DeepSeek-style
        `reasoning_content` in a chat-completions history): part of what it sent, so counted."""
        meta = self.meta
        if meta is None or meta.get("reasoning_resent") is not True:
            return ""
        text = meta.get("reasoning")
        return text if type(text) is str else ""

    def with_content(self, content: str) -> "Message":
        # hot path of every stage: a direct call is several times cheaper than dataclasses.replace
        return Message(self.id, self.role, content, self.tool_calls, self.tool_call_id, self.name, self.turn,
                       self.meta)

    def with_calls(self, calls: tuple[ToolCall, ...]) -> "Message":
        return Message(self.id, self.role, self.content, calls, self.tool_call_id, self.name, self.turn, self.meta)


def utf8_len(text: str) -> int:
    if text.isascii():
        return len(text)
    return text_sizes(text)[1] if len(text) > LONG_TEXT else len(text.encode("utf-8", "surrogatepass"))


def utf8(text: str) -> bytes:
    """The UTF-8 encoding of `text` (a lone surrogate as its three bytes, as everywhere here), kept a
    short while for a long text: a tool result is counted as it arrives (text_sizes encodes it) and
    scanned for errors and counted in lines when the ledger enters it, a few messages later."""
    data = _ENCODED.get(text)
    if data is None:
        data = text.encode("utf-8", "surrogatepass")
        if len(text) > LONG_TEXT:
            _ENCODED.put(text, data)
    return data


def text_copy(text: str) -> str:
    """An equal text that is another object: what CPython keeps inside a str a C library read as UTF-8
    (a str that is not ASCII keeps that copy as long as it lives) stays with the copy, and no cache
    keyed by the text's identity knows it."""
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "surrogatepass")


def kept_utf8(text: str) -> bytes | None:
    """`utf8(text)` if it is still kept, else None."""
    return _ENCODED.get(text)


LONG_TEXT = 2_000   # a text longer than this has its sizes worked out once, not once per asker
_SIZES = TextCache(1 << 14)
# the last few long texts' encodings: enough for the messages between two requests, few enough that
# holding them costs little (a session's results are not all kept twice)
_ENCODED = TextCache(64)
_HIGH_BYTES = bytes(range(0x80, 0x100))
_SPAN = 1024


def text_sizes(text: str) -> tuple[int, int]:
    """(ASCII characters, UTF-8 bytes) of a long text that is not ASCII, once per text object.

    A session's tool results are counted for the heuristic (its ASCII characters) as they arrive and
    measured in bytes when masked: one encoding gives both, where each had an encoding of its own.
    Every character outside ASCII is encoded as bytes of 0x80 and up, so the ASCII characters are the
    bytes below it; a span of the encoding holding none of those is counted by its length (most are:
    a log with a few non-ASCII characters, which come a line or a word at a time). Spans of 1 KiB:
    on the bench session 4 KiB ones were three in five not ASCII, 1 KiB ones one in five, so 40% less
    goes through `translate`; smaller ones cost more in this loop than they keep out of it."""
    sizes = _SIZES.get(text)
    if sizes is None:
        data = utf8(text)
        ascii_chars = 0
        for start in range(0, len(data), _SPAN):
            span = data[start:start + _SPAN]
            ascii_chars += len(span) if span.isascii() else len(span.translate(None, _HIGH_BYTES))
        sizes = (ascii_chars, len(data))
        _SIZES.put(text, sizes)
    return sizes


def content_text(content: Any) -> str:
    """Flatten chat-completions content (string, null or a list of parts) to text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping):
                if "text" in part and isinstance(part["text"], str):
                    parts.append(part["text"])
                elif part.get("type") in ("image_url", "image", "input_image"):
                    parts.append("[image]")
        return "\n".join(parts)
    return json.dumps(content, ensure_ascii=False)


def _note(problems: list[str] | None, text: str) -> None:
    if problems is not None:
        problems.append(text)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def short_value(value: Any, limit: int = 24) -> str:
    """A field's value for a warning: short, and never a 5,000-digit number."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**limit:
        return f"({len(str(abs(value)))}-digit number)"
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, (str, list, dict)) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, RecursionError):
        return ""


def _text_field(value: Any, what: str, problems: list[str] | None) -> str:
    """A string field: a string as it is, a number as its digits, anything else defaulted to ""."""
    if type(value) is str:
        return value
    if value is None:
        return ""
    if type(value) is int:
        _note(problems, f"{what} {short_value(value)} is a number, read as text")
        return str(value) if abs(value) < 10**40 else ""
    _note(problems, f"{what} is {_kind(value)}, not a string; left empty")
    return ""


_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(text: str) -> str:
    """`text` with every lone surrogate (unencodable in UTF-8: a JSON "\\ud800" escape makes
    one) replaced by U+FFFD, so it can be written, printed and tokenized. A high and a low
    surrogate side by side (a pair split across two pieces) become the character they encode."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
