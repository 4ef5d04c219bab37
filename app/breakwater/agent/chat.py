"""One streamed chat-completions request, and what to do when it fails.

`stream_chat` reassembles the streamed reply (text, parallel tool calls by index, finish
reason, the usage chunk). A stream that dies after it started raises `StreamCut` carrying
what arrived, so the caller can log the partial reply truthfully. `classify` sorts every
other failure into context-length (compact and retry once), transient (back off and retry)
and fatal; `backoff_delay` honours Retry-After and otherwise grows exponentially to a cap.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import openai

from breakwater.core.log.message import ToolCall, replace_surrogates

CONTEXT_LENGTH = "context_length"
TRANSIENT = "transient"
FATAL = "fatal"

# how providers word a prompt that does not fit (OpenAI, vLLM, llama.cpp, Ollama, Anthropic-compatible)
_CONTEXT_WORDS = re.compile(
    r"context[_ ]length|maximum context|context window|exceeds? the (?:available )?context|context size|"
    r"too many tokens|prompt is too long|input is too long|reduce the length", re.IGNORECASE)
# the window the provider names in that error: "maximum context length is 32000 tokens" (OpenAI, vLLM),
# "context length of 32000", "context window of 32,000", "n_ctx: 4096" / "context size (4096)" (llama.cpp)
_WINDOW_WORDS = re.compile(
    r"(?:maximum context length is|context length of|context window (?:is|of)|context size \(|n_ctx[:= ]*)\s*"
    r"(\d[\d,_]*)", re.IGNORECASE)
_RETRYABLE_STATUS = (408, 409, 429)
# a Retry-After longer than this (or than the backoff cap, if larger) is not worth waiting for
MAX_RETRY_AFTER_S = 120.0


@dataclass
class Reply:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    model: str | None = None

    @property
    def empty(self) -> bool:
        return not self.text and not self.tool_calls


class StreamCut(Exception):
    """The stream started, then broke off (or went quiet, or ran out of time: `timed_out`);
    `partial` is everything that arrived."""

    def __init__(self, reason: str, partial: Reply, timed_out: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.partial = partial
        self.timed_out = timed_out


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str                  # CONTEXT_LENGTH | TRANSIENT | FATAL
    message: str               # one line for the log and the user
    status: int | None = None
    code: str | None = None
    retry_after: float | None = None
    window: int | None = None  # the context window a context-length error names, if it names one


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify(exc: BaseException) -> Failure:
    if isinstance(exc, StreamCut):
        return Failure(TRANSIENT, one_line(exc.reason) if exc.timed_out else f"stream cut: {one_line(exc.reason)}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        code = exc.code or _body_code(exc.body)
        message = f"HTTP {status}: {one_line(_body_message(exc.body) or exc.message)}"
        if status == 413 or code == "context_length_exceeded" or (
                status == 400 and _CONTEXT_WORDS.search(str(exc.message))):
            return Failure(CONTEXT_LENGTH, message, status, code, window=provider_window(f"{message} {exc.message}"))
        if status == 429 and code == "insufficient_quota":
            return Failure(FATAL, message, status, code)
        if status in _RETRYABLE_STATUS or status >= 500:
            return Failure(TRANSIENT, message, status, code, retry_after(exc.response.headers))
        return Failure(FATAL, message, status, code)
    if isinstance(exc, openai.APITimeoutError):
        return Failure(TRANSIENT, "request timed out")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return Failure(TRANSIENT, f"connection error: {one_line(cause or exc.message)}")
    if isinstance(exc, openai.APIError):  # an error event inside a stream
        return Failure(TRANSIENT, f"API error: {one_line(exc.message)}", code=exc.code)
    return Failure(FATAL, f"{type(exc).__name__}: {one_line(exc)}")


def provider_window(text: str) -> int | None:
    """The context window a provider's error message names (None if it names none)."""
    m = _WINDOW_WORDS.search(text)
    if m is None:
        return None
    window = int(re.sub(r"[,_]", "", m.group(1)))
    return window if window > 0 else None


def _body_code(body: Any) -> str | None:
    if isinstance(body, Mapping):
        code = body.get("code")
        if code is None and isinstance(body.get("error"), Mapping):
            code = body["error"].get("code")
        return None if code is None else str(code)
    return None


def _body_message(body: Any) -> str | None:
    if isinstance(body, Mapping):
        message = body.get("message")
        if message is None and isinstance(body.get("error"), Mapping):
            message = body["error"].get("message")
        return message if isinstance(message, str) and message else None
    return None


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, retry-after seconds or date), or None."""
    if not headers:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        if seconds == seconds and seconds >= 0:  # not NaN
            return seconds
    value = headers.get("retry-after")
    if value:
        parsed = email.utils.parsedate_tz(value)
        if parsed is not None:
            return max(0.0, email.utils.mktime_tz(parsed) - time.time())
    return None


def backoff_delay(attempt: int, base_s: float, cap_s: float, server_says: float | None = None,
                  rng: Callable[[], float] = random.random) -> float:
    """Seconds to wait before retry number `attempt` (1-based).

    The server's Retry-After wins (the caller decides whether it is too long to wait);
    otherwise base x 2^(attempt-1), capped, with up to 20% jitter off so clients that
    failed together do not retry together.
    """
    if server_says is not None:
        return server_says
    delay = min(cap_s, base_s * (2 ** (attempt - 1)))
    return delay * (1 - 0.2 * rng())


class Assembler:
    """Streamed deltas -> one reply. Tool calls are keyed by index; names come once,
    arguments in fragments (some servers send a whole call in one delta). Fragments are
    kept in lists and joined once: `+=` on a string held in a dict copies it every time,
    which made a 2 MB argument take a minute. Lone surrogates (a JSON "\\ud800" escape)
    cannot be written or printed: they become U+FFFD here, as the reply arrives."""

    def __init__(self, on_text: Callable[[str], None] | None):
        self.on_text = on_text
        self.text: list[str] = []
        self.calls: dict[int, _CallParts] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None
        self.model: str | None = None

    def feed(self, chunk: Any) -> bool:
        """Take one chunk; True if it carried anything of the reply (keep-alive deltas do not)."""
        progress = False
        self.model = getattr(chunk, "model", None) or self.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.usage = {"prompt_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
                          "completion_tokens": int(getattr(usage, "completion_tokens", 0) or 0)}
            progress = True
        for choice in getattr(chunk, "choices", None) or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                if delta.content:
                    self.text.append(delta.content)
                    progress = True
                    if self.on_text is not None:
                        self.on_text(replace_surrogates(delta.content))
                for n, tc in enumerate(delta.tool_calls or ()):
                    index = tc.index if tc.index is not None else n
                    call = self.calls.get(index)
                    if call is None:
                        call = self.calls[index] = _CallParts()
                    if tc.id:
                        call.id = tc.id
                    fn = tc.function
                    if fn is not None:
                        if fn.name and not call.name:
                            call.name = fn.name
                        if fn.arguments:
                            call.arguments.append(fn.arguments)
                    progress = True
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
                progress = True
        return progress

    def reply(self) -> Reply:
        calls = [ToolCall(replace_surrogates(c.id), replace_surrogates(c.name),
                          replace_surrogates("".join(c.arguments))) for _, c in sorted(self.calls.items())]
        return Reply(replace_surrogates("".join(self.text)), calls, self.finish_reason, self.usage, self.model)


@dataclass(slots=True)
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Deadlines:
    """How long one request may take: `total` from sending it to the last chunk, `progress`
    without a chunk that adds to the reply (SSE keep-alive comments and empty deltas do not
    count). The client's own timeout only bounds the gap between bytes, which keep-alives reset."""

    total: float | None = None
    progress: float | None = None


async def stream_chat(client: openai.AsyncOpenAI, *, model: str, messages: Sequence[Mapping[str, Any]],
                      tools: Sequence[Mapping[str, Any]] | None = None,
                      assembler: Assembler | None = None, deadlines: Deadlines = Deadlines(),
                      **params: Any) -> Reply:
    """Send one streamed request; return the whole reply, or raise (APIError before the
    stream starts, StreamCut once it has, or when a deadline passes or a chunk is not valid
    JSON). Pass an `Assembler` to see the text as it comes and, if the task is cancelled
    mid-way, what had arrived."""
    kwargs: dict[str, Any] = {"model": model, "messages": list(messages), "stream": True,
                              "stream_options": {"include_usage": True}}
    if tools:
        kwargs["tools"] = list(tools)
    kwargs.update({k: v for k, v in params.items() if v is not None})
    acc = assembler or Assembler(None)
    loop = asyncio.get_running_loop()
    end = None if deadlines.total is None else loop.time() + deadlines.total

    def next_deadline() -> float | None:
        if deadlines.progress is None:
            return end
        quiet = loop.time() + deadlines.progress
        return quiet if end is None else min(end, quiet)

    stream = None
    try:
        async with asyncio.timeout_at(next_deadline()) as budget:
            stream = await client.chat.completions.create(**kwargs)
            async for chunk in stream:
                try:
                    progress = acc.feed(chunk)
                except (AttributeError, TypeError, ValueError) as exc:
                    raise _Malformed(f"a chunk of an unexpected shape ({type(exc).__name__}: {exc})") from exc
                if progress and deadlines.progress is not None:
                    budget.reschedule(next_deadline())
    except TimeoutError:
        await _close(stream)
        if end is not None and loop.time() >= end - 0.001:
            reason = f"request deadline passed: no complete reply within {deadlines.total:g} s"
        else:
            reason = f"stream stalled: nothing new for {deadlines.progress:g} s"
        raise StreamCut(reason, acc.reply(), timed_out=True) from None
    except _Malformed as exc:
        await _close(stream)
        raise StreamCut(f"malformed stream: {exc}", acc.reply()) from None
    except openai.APIError as exc:
        if stream is None:
            raise
        await _close(stream)
        raise StreamCut(classify(exc).message, acc.reply()) from exc
    except ValueError as exc:  # json.JSONDecodeError from the client's SSE parser
        if stream is None:
            raise
        await _close(stream)
        raise StreamCut(f"malformed stream: data that is not JSON ({one_line(exc, 120)})", acc.reply()) from None
    except BaseException:  # cancelled: hang up, and let the caller log what arrived
        await _close(stream)
        raise
    reply = acc.reply()
    if reply.finish_reason is None and reply.usage is None:
        raise StreamCut("the stream ended without a finish reason", reply)
    return reply


class _Malformed(Exception):
    pass


async def _close(stream: Any) -> None:
    if stream is None:
        return
    try:
        await stream.close()
    except Exception:  # noqa: BLE001 - closing a broken connection may fail again; nothing to do
        pass
