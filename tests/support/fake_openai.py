"""An OpenAI-compatible HTTP server for tests, driven by a script of replies.

Tests run the real `openai` client against it (STYLE rule 15): the bytes on the wire are the
ones a provider sends — SSE chunks, tool-call fragments, a usage chunk, error bodies, a stream
that dies mid-way — so the agent's streaming, retry and compaction paths are exercised for real.

    with FakeOpenAIServer([Reply(text="hello"), Reply.rate_limit(retry_after=1)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-test-1", max_retries=0)
        ...
        assert server.requests[0].problems == []

Every request is checked with `check_request`; in `strict` mode a request with problems is
answered 400 so the test fails loudly.
"""

from __future__ import annotations

import collections
import itertools
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Iterator, Mapping

from .request_checks import Counter, check_request, message_text

DEFAULT_MODEL = "fake-model"


def chars_over_four(messages: list[Mapping[str, Any]]) -> int:
    """Default `usage.prompt_tokens`: the characters of the messages' text and tool calls, / 4.

    Deliberately not the SPEC §2 heuristic, so the agent's calibration has a real factor to learn.
    """
    chars = 0
    for message in messages:
        chars += len(message_text(message.get("content")))
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(function, Mapping):
                continue
            chars += len(str(function.get("name") or "")) + len(str(function.get("arguments") or ""))
    return chars // 4


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """One tool call the fake model makes; `arguments` may be a dict (sent as JSON)."""

    name: str
    arguments: str | Mapping[str, Any] = "{}"
    id: str | None = None  # None: the server numbers it, call_001, call_002, ...

    @property
    def arguments_json(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer to one chat-completions request.

    A success (`status` 200) carries `text` and/or `tool_calls`; a failure carries `status`,
    `error` (the body's "error" object) and `headers`. `cut_after` ends a stream abruptly after
    that many SSE events (the first event is the role chunk) without `data: [DONE]`;
    `malformed_after` sends a `data:` line that is not JSON instead, then ends the body;
    `keepalive_after` sends only SSE keep-alive comments from there on (every
    `keepalive_every` seconds, for at most `keepalive_for`). Text may hold lone surrogates:
    they go out as JSON escapes ("\\ud800"), as a broken server would send them.
    """

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    finish_reason: str | None = None  # None: "tool_calls" when there are calls, else "stop"
    prompt_tokens: int | None = None  # None: the server's usage counter decides
    completion_tokens: int | None = None  # None: output characters / 4, at least 1
    chunk_size: int = 8  # characters per streamed content chunk and per argument fragment
    interleave_calls: bool = False  # stream parallel calls' fragments round-robin, not one by one
    chunk_delay: float = 0.0  # seconds between streamed events
    model: str | None = None  # None: echo the request's model
    status: int = 200
    error: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    cut_abruptly: bool = True  # False: end the HTTP body cleanly, just without [DONE] or finish
    malformed_after: int | None = None
    keepalive_after: int | None = None
    keepalive_every: float = 0.05
    keepalive_for: float = 30.0
    echo_key: bool = False  # put the request's bearer token into the error message, as some servers do

    @classmethod
    def calls(cls, *calls: ScriptedToolCall | tuple[str, Any], text: str = "", **kw: Any) -> "Reply":
        """Parallel tool calls: `Reply.calls(("read_file", {"path": "a"}), ("bash", {"cmd": "ls"}))`."""
        made = tuple(c if isinstance(c, ScriptedToolCall) else ScriptedToolCall(*c) for c in calls)
        return cls(text=text, tool_calls=made, **kw)

    @classmethod
    def rate_limit(cls, retry_after: float = 1, message: str = "Rate limit reached for requests") -> "Reply":
        return cls(
            status=429,
            headers={"Retry-After": _seconds(retry_after), "retry-after-ms": str(int(retry_after * 1000))},
            error={"message": message, "type": "requests", "param": None, "code": "rate_limit_exceeded"},
        )

    @classmethod
    def server_error(cls, message: str = "The server had an error while processing your request.") -> "Reply":
        return cls(status=500, error={"message": message, "type": "server_error", "param": None, "code": None})

    @classmethod
    def context_length_exceeded(cls, window: int = 8192, requested: int | None = None) -> "Reply":
        requested = window + 1 if requested is None else requested
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages resulted in "
            f"{requested} tokens. Please reduce the length of the messages."
        )
        return cls(
            status=400,
            error={"message": message, "type": "invalid_request_error", "param": "messages",
                   "code": "context_length_exceeded"},
        )

    @classmethod
    def payload_too_large(cls) -> "Reply":
        return cls(
            status=413,
            error={"message": "Request too large: the request body exceeds the maximum size.",
                   "type": "invalid_request_error", "param": None, "code": "request_too_large"},
        )

    @classmethod
    def invalid_key(cls, status: int = 401) -> "Reply":
        """An error body that quotes the key the client sent (OpenAI masks most of it; not all servers do)."""
        return cls(status=status, echo_key=True,
                   error={"message": "Incorrect API key provided: {api_key}. Check the key and try again.",
                          "type": "invalid_request_error", "param": None, "code": "invalid_api_key"})

    @classmethod
    def cut_stream(cls, text: str, after: int = 3, **kw: Any) -> "Reply":
        """Stream `text` but drop the connection after `after` events, before [DONE]."""
        return cls(text=text, cut_after=after, **kw)

    @property
    def is_error(self) -> bool:
        return self.status >= 400


Responder = Callable[[dict[str, Any]], Reply]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the server saw it. Header names are lower-cased."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    problems: tuple[str, ...] = ()
    reply: Reply | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or ()) if isinstance(self.body, Mapping) else []


class FakeOpenAIServer:
    """A threaded OpenAI-compatible server on 127.0.0.1 with a scripted model behind it.

    replies: answered in order, one per chat-completions request.
    responder: called with the request body when set, instead of taking from the queue.
    default: the answer once the queue is empty (None: a 500 naming the exhausted script).
    usage_counter: `prompt_tokens` for a request's messages (default: characters / 4).
    strict: answer 400 with the problems when `check_request` finds any.
    window, check_counter, static_prefix, api_key: passed to `check_request`.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        responder: Responder | None = None,
        default: Reply | None = None,
        usage_counter: Counter = chars_over_four,
        strict: bool = False,
        window: int | None = None,
        check_counter: Counter | None = None,
        static_prefix: str | None = None,
        api_key: str | None = None,
        models: Iterable[str] = (DEFAULT_MODEL,),
    ) -> None:
        self.responder = responder
        self.default = default
        self.usage_counter = usage_counter
        self.strict = strict
        self.window = window
        self.check_counter = check_counter
        self.static_prefix = static_prefix
        self.api_key = api_key
        self.models = tuple(models)
        self._replies: collections.deque[Reply] = collections.deque(replies)
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> "FakeOpenAIServer":
        if self._httpd is not None:
            return self
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # script

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not yet consumed."""
        with self._lock:
            return len(self._replies)

    # what was received

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    @property
    def problems(self) -> list[str]:
        """Every problem of every request, prefixed with the request's index."""
        return [f"request {i}: {p}" for i, r in enumerate(self.requests) for p in r.problems]

    def assert_valid(self) -> None:
        problems = self.problems
        assert not problems, "invalid requests reached the fake server:\n" + "\n".join(problems)

    # used by the handler

    def _next_id(self) -> int:
        return next(self._ids)

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _choose(self, body: dict[str, Any]) -> Reply:
        if self.responder is not None:
            return self.responder(body)
        with self._lock:
            if self._replies:
                return self._replies.popleft()
        if self.default is not None:
            return self.default
        return Reply.server_error("FakeOpenAIServer: the reply script is exhausted")


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _json_bytes(payload: Any) -> bytes:
    text = json.dumps(payload, ensure_ascii=False)
    try:
        return text.encode()
    except UnicodeEncodeError:  # a lone surrogate: only its JSON escape can go on the wire
        return json.dumps(payload).encode()


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeOpenAIServer
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, as real providers speak
    timeout = 30  # an idle keep-alive connection must not pin a thread forever

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            pass  # a client closing its keep-alive connection with a reset is not a server fault

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?", 1)[0].rstrip("/")
        self.fake._record(RecordedRequest("GET", self.path, self._headers(), None))
        if path == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "breakwater-tests"} for m in self.fake.models]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error_body(404, {"message": f"Unknown path {path}", "type": "invalid_request_error",
                                        "param": None, "code": "unknown_url"})

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?", 1)[0].rstrip("/")
        headers = self._headers()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode(errors="replace")
        if not isinstance(body, dict):
            self.fake._record(RecordedRequest("POST", self.path, headers, body, ("body is not a JSON object",)))
            self._send_error_body(400, {"message": "We could not parse the JSON body of your request.",
                                        "type": "invalid_request_error", "param": None, "code": None})
            return
        if path != "/v1/chat/completions":
            self.fake._record(RecordedRequest("POST", self.path, headers, body))
            self._send_error_body(404, {"message": f"Unknown path {path}", "type": "invalid_request_error",
                                        "param": None, "code": "unknown_url"})
            return

        fake = self.fake
        problems = tuple(check_request(body, fake.window, fake.check_counter, static_prefix=fake.static_prefix,
                                       headers=headers, api_key=fake.api_key))
        if problems and fake.strict:
            fake._record(RecordedRequest("POST", self.path, headers, body, problems))
            self._send_error_body(400, {"message": "FakeOpenAIServer strict check: " + "; ".join(problems),
                                        "type": "invalid_request_error", "param": None,
                                        "code": "invalid_request_shape"})
            return
        reply = fake._choose(body)
        fake._record(RecordedRequest("POST", self.path, headers, body, problems, reply))
        if reply.is_error:
            error = dict(reply.error or {"message": HTTPStatus(reply.status).phrase})
            if reply.echo_key:
                token = headers.get("authorization", "").removeprefix("Bearer ")
                error["message"] = str(error.get("message", "")).replace("{api_key}", token)
            self._send_error_body(reply.status, error, reply.headers)
        elif body.get("stream"):
            self._stream(body, reply)
        else:
            self._send_json(200, self._completion(body, reply), reply.headers)

    # replies

    def _usage(self, body: Mapping[str, Any], reply: Reply) -> dict[str, int]:
        messages = body.get("messages") if isinstance(body.get("messages"), list) else []
        prompt = reply.prompt_tokens if reply.prompt_tokens is not None else self.fake.usage_counter(messages)
        output = len(reply.text) + sum(len(c.name) + len(c.arguments_json) for c in reply.tool_calls)
        completion = reply.completion_tokens if reply.completion_tokens is not None else max(1, output // 4)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _call_ids(self, reply: Reply) -> list[str]:
        return [c.id or f"call_{self.fake._next_id():03d}" for c in reply.tool_calls]

    def _completion(self, body: Mapping[str, Any], reply: Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
                for call_id, c in zip(self._call_ids(reply), reply.tool_calls)
            ]
        return {
            "id": f"chatcmpl-{self.fake._next_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or DEFAULT_MODEL,
            "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")}],
            "usage": self._usage(body, reply),
        }

    def _stream_events(self, body: Mapping[str, Any], reply: Reply) -> Iterator[dict[str, Any]]:
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        base = {
            "id": f"chatcmpl-{self.fake._next_id()}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": reply.model or body.get("model") or DEFAULT_MODEL,
            "system_fingerprint": "fp_fake",
        }

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            out = dict(base, choices=[{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}])
            if include_usage:
                out["usage"] = None
            return out

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in _pieces(reply.text, reply.chunk_size):
            yield chunk({"content": piece})

        # OpenAI's shape: the first delta of a call has index, id, type and name with empty
        # arguments; the following deltas carry only the index and an argument fragment.
        per_call = []
        for index, (call_id, call) in enumerate(zip(self._call_ids(reply), reply.tool_calls)):
            first = {"index": index, "id": call_id, "type": "function",
                     "function": {"name": call.name, "arguments": ""}}
            rest = [{"index": index, "function": {"arguments": a}}
                    for a in _pieces(call.arguments_json, reply.chunk_size)]
            per_call.append([first, *rest])
        if reply.interleave_calls:
            ordered = [d for group in itertools.zip_longest(*per_call) for d in group if d is not None]
        else:
            ordered = [d for deltas in per_call for d in deltas]
        for delta in ordered:
            yield chunk({"tool_calls": [delta]})

        yield chunk({}, reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop"))
        if include_usage:
            yield dict(base, choices=[], usage=self._usage(body, reply))

    def _stream(self, body: Mapping[str, Any], reply: Reply) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            for n, event in enumerate(self._stream_events(body, reply)):
                if reply.cut_after is not None and n >= reply.cut_after:
                    self._cut(reply.cut_abruptly)
                    return
                if reply.malformed_after is not None and n >= reply.malformed_after:
                    self._write_chunk(b'data: {"id": "chatcmpl-broken", "choices": [{"index": 0, "delta": {"cont\n\n')
                    self._cut(abruptly=False)
                    return
                if reply.keepalive_after is not None and n >= reply.keepalive_after:
                    self._keep_alive(reply)
                    return
                if n and reply.chunk_delay:
                    time.sleep(reply.chunk_delay)
                self._write_chunk(b"data: %s\n\n" % _json_bytes(event))
            self._write_chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away mid-stream

    def _keep_alive(self, reply: Reply) -> None:
        """SSE comments and nothing else: every byte resets the client's read timeout."""
        until = time.monotonic() + reply.keepalive_for
        while time.monotonic() < until:
            self._write_chunk(b": keep-alive\n\n")
            time.sleep(reply.keepalive_every)
        self._cut(abruptly=False)

    def _cut(self, abruptly: bool) -> None:
        """End the stream without [DONE]: drop the TCP connection, or end the body cleanly."""
        self.close_connection = True
        if not abruptly:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        # FIN without the terminating zero-size chunk: the client has every byte sent so far
        # but sees an incomplete body. (An RST could discard bytes still in its buffer.)
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    # plumbing

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _send_json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = _json_bytes(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error_body(self, status: int, error: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> None:
        self._send_json(status, {"error": dict(error)}, headers)
