"""The message: one entry of a chat-completions conversation, plus a stable id."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # the JSON string exactly as the model produced it; never rewritten

    def to_api(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_api(cls, data: Mapping[str, Any]) -> "ToolCall":
        fn = data.get("function") or {}
        args = fn.get("arguments", data.get("arguments", ""))
        if not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        return cls(id=str(data.get("id") or ""), name=str(fn.get("name", data.get("name", "")) or ""), arguments=args)


@dataclass(frozen=True, slots=True)
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
    def from_record(cls, rec: Mapping[str, Any], fallback_id: str = "") -> "Message":
        content = rec.get("content")
        calls = rec.get("tool_calls") or ()
        return cls(
            id=str(rec.get("id") or fallback_id),
            role=str(rec.get("role") or ""),
            content=content_text(content),
            tool_calls=tuple(ToolCall.from_api(c) for c in calls if isinstance(c, Mapping)),
            tool_call_id=None if rec.get("tool_call_id") is None else str(rec["tool_call_id"]),
            name=None if rec.get("name") is None else str(rec["name"]),
            turn=int(rec.get("turn") or 0),
            meta=rec.get("meta") if isinstance(rec.get("meta"), Mapping) else None,
        )

    def with_content(self, content: str) -> "Message":
        # hot path of every stage: a direct call is several times cheaper than dataclasses.replace
        return Message(self.id, self.role, content, self.tool_calls, self.tool_call_id, self.name, self.turn,
                       self.meta)


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


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
