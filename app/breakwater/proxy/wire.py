"""What every provider wire gives the proxy, whatever its shape: the conversation a request carries (as
our Message shape, each message with where it came from in the request so it can be put back), the
reply a response carries, and the provider's usage figures.

A wire is one module (anthropic.py, chat.py, responses.py) listed in `breakwater.proxy.WIRES`; each
defines `PATH`, `read_request`, `rebuild`, `read_reply`, `StreamReader` and `error_body`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.message import content_text as part_text  # the wires' contents are text or typed parts

MAX_REPLY_TEXT = 1 << 20   # the reply text kept for the log; the agent gets every byte whatever its length
MAX_EVENT = 64 << 20       # bytes of one server-sent event read for the log


@dataclass(frozen=True, slots=True)
class Usage:
    """The provider's figures for one request, in one unit across wires: `input` is the input not read
    from the cache (Anthropic's `input_tokens`; OpenAI's prompt tokens less the cached ones)."""

    input: int | None = None
    cache_write: int | None = None
    cache_read: int | None = None
    output: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)   # the provider's usage object, as it sent it

    @property
    def prompt(self) -> int | None:
        """The whole request as billed: input, cache writes and cache reads."""
        parts = [v for v in (self.input, self.cache_write, self.cache_read) if v is not None]
        return sum(parts) if parts else None

    def record(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt, "completion_tokens": self.output, "input_tokens": self.input,
                "cache_write_tokens": self.cache_write, "cache_read_tokens": self.cache_read,
                "provider_usage": self.raw}


@dataclass(slots=True)
class Item:
    """One message of the conversation a request carries, and where it came from in the request
    (wire-specific: what `rebuild` needs to put it back as it was)."""

    message: Message            # its id is the log's once the session knows it
    origin: Any


@dataclass(slots=True)
class Conversation:
    """A request read: its system text, its messages (the system excluded), its model, and the
    session id the agent sent with it, if any."""

    system: str
    items: list[Item]
    model: str
    stream: bool
    agent_session: str | None = None
    tools: Any = None


@dataclass(slots=True)
class Reply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    model: str | None = None
    stop: str | None = None


def placed(view: list[Message], items: list[Item]):
    """(each message of the view but the system, the request's item it came from or None): a wire's
    `rebuild` puts each back from its item, or writes it anew (a summary)."""
    by_id = {it.message.id: it for it in items}
    for vm in view:
        if vm.role != "system":
            yield vm, by_id.get(vm.id)


def fingerprint(msg: Message) -> str:
    """What identifies a message when the agent sends its history again: role, text, tool call ids and
    names (not the argument text, which an agent may serialize anew), the call answered."""
    h = hashlib.blake2b(digest_size=12)
    h.update(msg.role.encode())
    h.update(b"\0" + msg.content.encode("utf-8", "surrogatepass"))
    for c in msg.tool_calls:
        h.update(b"\1" + c.id.encode("utf-8", "surrogatepass") + b"\2" + c.name.encode("utf-8", "surrogatepass"))
    h.update(b"\3" + (msg.tool_call_id or "").encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def arguments_text(value: Any) -> str:
    """A tool call's arguments as one JSON text, the same however the wire carried them (an object on
    Anthropic's, a string on OpenAI's)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def changed_arguments(sent: Iterable[ToolCall], received: Iterable[ToolCall]) -> dict[str, str]:
    """{call id: arguments} of the calls whose arguments the view changed (a policy clearing far tool
    inputs sends "{}"): the rest of each call goes out as the agent sent it."""
    before = {c.id: c.arguments for c in received}
    return {c.id: c.arguments for c in sent if c.id in before and before[c.id] != c.arguments}


def capped(text: str) -> str:
    return text if len(text) <= MAX_REPLY_TEXT else text[:MAX_REPLY_TEXT] + "\n…[reply cut for the log]"


class SSE:
    """Server-sent events split from the bytes of a stream as they come: (event name, data text)."""

    def __init__(self) -> None:
        self._buf = b""
        self._event: str | None = None
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str | None, str]]:
        out = []
        if len(self._buf) + len(chunk) > MAX_EVENT:
            # one event this long is not a reply we can read: the bytes still reach the agent, unread here
            self._buf, self._event, self._data = b"", None, []
            return out
        self._buf += chunk
        while True:
            nl = self._buf.find(b"\n")
            if nl < 0:
                break
            line = self._buf[:nl].rstrip(b"\r").decode("utf-8", "replace")
            self._buf = self._buf[nl + 1:]
            if not line:
                if self._data or self._event:
                    out.append((self._event, "\n".join(self._data)))
                self._event, self._data = None, []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    self._event = value
                elif name == "data":
                    self._data.append(value)
        return out


def loads(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None
