"""The proxy's HTTP side (aiohttp, server and client): a request on a wire the proxy knows is recorded in
its session and, in compact mode, sent as the pipeline's view of it; anything else (`count_tokens`,
`/v1/models`, a body that is not JSON) goes through untouched and unrecorded.

What goes upstream: the method, path and query, every header but the hop-by-hop ones and
`Accept-Encoding` (the proxy reads the reply to record it, so it asks for it uncompressed), and the
body: in observe mode the bytes the agent sent. What comes back: the status, headers and body as the
provider sent them, each chunk written to the agent as it arrives (a stream is read beside, for the
reply and the usage). An upstream that cannot be reached, or is silent too long, is answered in the
wire's own error shape with 502 / 504, so the agent's own retries take over.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import aiohttp
from aiohttp import web

from breakwater.agent.redact import Redactor
from breakwater.proxy import WIRES
from breakwater.proxy.sessions import ProxySession, Settings, Tracker
from breakwater.proxy.wire import SSE, loads

HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "trailers", "transfer-encoding", "upgrade", "host", "content-length", "accept-encoding"})
REPLY_DROP = HOP_BY_HOP | {"content-encoding"}
MAX_KEPT_REPLY = 64 << 20      # of a reply, what is kept to read it for the log (all of it goes through)
SECRET_HEADERS = ("x-api-key", "authorization", "api-key", "x-goog-api-key")


@dataclass(frozen=True, slots=True)
class Recorded:
    session: ProxySession
    turn: int
    send: bytes


@dataclass(frozen=True, slots=True)
class Limits:
    max_request: int = 64 << 20     # bytes of a request body (Anthropic's own limit is 32 MB)
    connect_s: float = 30.0
    read_s: float = 600.0           # between two bytes of the reply, as the OpenAI and Anthropic clients wait
    deadline_s: float = 1800.0      # from sending to the reply's last byte


def wire_for(path: str) -> ModuleType | None:
    for wire in WIRES:
        if path.endswith(wire.PATH) or path.endswith(wire.PATH.removeprefix("/v1")):
            return wire
    return None


def upstream_url(upstream: str, path: str, query: str) -> str:
    base = upstream.rstrip("/")
    if base.endswith("/v1") and path.startswith("/v1/"):
        path = path[3:]
    return base + path + (f"?{query}" if query else "")


def _secrets(headers: Any) -> list[str]:
    out = []
    for name in SECRET_HEADERS:
        value = headers.get(name)
        if value:
            out.append(value)
            if " " in value:
                out.append(value.split(" ", 1)[1])
    return [s for s in out if len(s) >= 8]


def _redact(text: str, secrets: list[str]) -> str:
    """`text` with each of the client's keys taken out, plain or encoded (base64, hex: agent/redact.py)."""
    for s in sorted(secrets, key=len, reverse=True):
        text = Redactor(s)(text)
    return text


def _client_name(headers: Any) -> str:
    agent = headers.get("user-agent") or ""
    return agent.split(" ", 1)[0][:80] or "unknown"


class Proxy:
    def __init__(self, upstream: str, settings: Settings, limits: Limits = Limits()):
        self.upstream = upstream
        self.settings = settings
        self.limits = limits
        self.tracker = Tracker(settings)
        self.client: aiohttp.ClientSession | None = None
        self.failed = False

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.limits.max_request)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    async def _start(self, _app: web.Application) -> None:
        timeout = aiohttp.ClientTimeout(total=self.limits.deadline_s, sock_connect=self.limits.connect_s,
                                        sock_read=self.limits.read_s)
        self.client = aiohttp.ClientSession(timeout=timeout, auto_decompress=False,
                                            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300))

    async def _stop(self, _app: web.Application) -> None:
        if self.client is not None:
            await self.client.close()
        self.tracker.close()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            wire = wire_for(request.path)
            return self._error(wire, 413, f"the request is over the proxy's limit of {self.limits.max_request:,} "
                                          f"bytes (breakwater proxy --max-request-mb)")
        wire = wire_for(request.path) if request.method == "POST" else None
        if wire is None:
            return await self._forward(request, None, body, lambda: None)
        if self.settings.mode == "compact":
            recorded = await self._record_compacted(request, wire, body)    # it decides what is sent
            if recorded is None:
                return await self._forward(request, wire, body, lambda: None)
            try:
                return await self._forward(request, wire, recorded.send, lambda: recorded)
            finally:
                recorded.session.lock.release()
        # observing, the bytes go first: recording them waits until the reply has gone through
        return await self._forward(request, wire, body, lambda: self._record(request, wire, body))

    async def _record_compacted(self, request: web.Request, wire: ModuleType, body: bytes) -> Recorded | None:
        """As `_record`, the request's view planned in a thread (a summary model may be asked), the
        session held until the reply is recorded."""
        entry = self._entry(request, wire, body)
        if entry is None:
            return None
        obj, conv, session, fps, held = entry
        await session.lock.acquire()
        try:
            turn, note = session.take(conv, fps, held, body, request.path)
            view, edits = await asyncio.to_thread(session.view)
            send = body
            if edits or len([m for m in view if m.role != "system"]) != len(conv.items):
                send = json.dumps(wire.rebuild(obj, conv.items, view), ensure_ascii=False).encode()
                note["edits"] = edits
            session.sent(turn, note, send, send is body)
            return Recorded(session, turn, send)
        except Exception as exc:  # noqa: BLE001 - as in _record
            session.lock.release()
            self._recording_failed(exc)
            return None

    def _record(self, request: web.Request, wire: ModuleType, body: bytes) -> Recorded | None:
        """The request entered in its session as it was sent (None: not JSON, or the recording failed,
        which is said once and never stops the request)."""
        entry = self._entry(request, wire, body)
        if entry is None:
            return None
        _, conv, session, fps, held = entry
        try:
            turn, note = session.take(conv, fps, held, body, request.path)
            session.sent(turn, note, body, True)
            return Recorded(session, turn, body)
        except Exception as exc:  # noqa: BLE001 - a recording that fails (a full disk) must not fail the agent
            self._recording_failed(exc)
            return None

    def _entry(self, request: web.Request, wire: ModuleType, body: bytes):
        """(the request read, its conversation, its session, its fingerprints, how much of it the session
        holds); None when it is not JSON or cannot be placed."""
        obj = loads(body)
        if not isinstance(obj, dict):
            return None
        try:
            conv = wire.read_request(obj, request.headers)
            return (obj, conv, *self.tracker.session_for(wire, conv, _client_name(request.headers)))
        except Exception as exc:  # noqa: BLE001 - as in _record
            self._recording_failed(exc)
            return None

    def _recording_failed(self, exc: Exception) -> None:
        if not self.failed:
            self.failed = True
            say(f"recording a request failed; it went through as the agent sent it (said once; others that fail "
                f"go the same way): {type(exc).__name__}: {exc}")

    def _error(self, wire: ModuleType | None, status: int, message: str) -> web.Response:
        from breakwater.proxy import anthropic

        body = (wire or anthropic).error_body(message)
        return web.Response(status=status, body=body, content_type="application/json")

    async def _forward(self, request: web.Request, wire: ModuleType | None, body: bytes,
                       recorded: Callable[[], Recorded | None]) -> web.StreamResponse:
        """Send `body` upstream and the reply back as it comes; `recorded()` (the request's place in its
        session, or None) is asked once the reply is through, when observing, or before, when compacting."""
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        url = upstream_url(self.upstream, request.path, request.query_string)
        secrets = _secrets(request.headers)
        try:
            resp = await self.client.request(request.method, url, data=body, headers=headers, allow_redirects=False)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            status = 504 if isinstance(exc, asyncio.TimeoutError) else 502
            why = _redact(f"breakwater proxy: the upstream {self.upstream} did not answer "
                          f"({type(exc).__name__}: {exc})", secrets)
            self._finish(recorded(), status, None, why)
            return self._error(wire, status, why)
        out = web.StreamResponse(status=resp.status, reason=resp.reason,
                                 headers={k: v for k, v in resp.headers.items() if k.lower() not in REPLY_DROP})
        if resp.content_length is not None:
            # framed as the provider framed it: pi's client (undici) failed its retry after a 500 sent chunked
            out.content_length = resp.content_length
        kept = bytearray()    # read once the reply has gone through: nothing but copying on its way
        cut = gone = None
        try:
            await out.prepare(request)
            async for chunk in resp.content.iter_any():
                if wire is not None and len(kept) < MAX_KEPT_REPLY:
                    kept += chunk
                if gone := await _to_agent(out.write(chunk)):
                    break
            else:
                gone = await _to_agent(out.write_eof())
        except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError) as exc:
            cut = _redact(f"the reply was cut: {type(exc).__name__}: {exc}", secrets)
        finally:
            if gone:
                resp.close()      # the provider stops generating for an agent that left
            else:
                resp.release()
        if wire is None:
            return out
        if resp.status >= 400:
            done = (resp.status, None, _redact(bytes(kept[:4000]).decode("utf-8", "replace"), secrets))
        elif cut is not None:
            done = (599, None, cut)
        else:
            reply = self._reply(wire, kept, "text/event-stream" in resp.headers.get("content-type", ""))
            # an agent may close as soon as it has the reply's last event (Codex, after `response.completed`): a
            # reply whose usage came is whole and recorded; one the agent left before its end was cut by the agent
            done = (599, None, "the agent closed the connection before the reply's end") \
                if gone and (reply is None or reply.usage is None) else (resp.status, reply, None)
        self._finish(recorded(), *done)
        return out

    @staticmethod
    def _reply(wire: ModuleType, kept: bytearray, stream: bool):
        if not stream:
            return wire.read_reply(loads(bytes(kept)))
        reader = wire.StreamReader()
        for event, data in SSE().feed(bytes(kept)):
            reader.feed(event, data)
        return reader.reply()

    def _finish(self, recorded: Recorded | None, status: int, reply, error: str | None = None) -> None:
        if recorded is None:
            return
        try:
            recorded.session.finish(recorded.turn, status, reply, error)
        except Exception as exc:  # noqa: BLE001 - as in _record
            self._recording_failed(exc)


async def _to_agent(write) -> bool:
    """Write to the agent; True when it has gone (closed its end): a failure on the agent's side, never
    taken for the provider's reply being cut."""
    try:
        await write
        return False
    except (ConnectionError, aiohttp.ClientConnectionError):
        return True


async def serve(proxy: Proxy, host: str, port: int, ready=None) -> None:
    """Run until cancelled; `ready(port)` once listening (the port the system chose for 0)."""
    runner = web.AppRunner(proxy.app(), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, reuse_address=True)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1] if site._server and site._server.sockets else port
    if ready is not None:
        ready(bound)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def say(text: str) -> None:
    print(f"breakwater proxy: {text}", file=sys.stderr, flush=True)
