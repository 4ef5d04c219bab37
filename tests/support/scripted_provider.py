"""A scripted provider on 127.0.0.1 speaking the three wires the proxy speaks (Anthropic Messages, OpenAI
Chat Completions, OpenAI Responses), streaming or not, for the proxy's tests and the real agents.

The main conversation (a request that offers tools) is played from a script of steps: each step is a
tool call (or the final answer), chosen by how many tool results the request already carries; side
requests (no tools: a title, a topic check) get a short text. A step may fail once first with a given
status and body (an overload, a context-length error), which the agent's own retry goes through.
Every request is kept as received: path, headers, body bytes.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

OUTPUT_TOKENS = 37


def usage_for(body: bytes) -> dict[str, int]:
    """Figures that grow with the request, as a provider's do: a quarter of its bytes, most read from the cache."""
    total = len(body) // 4
    cache_read, cache_write = total * 2 // 3, total // 6
    return {"input": total - cache_read - cache_write, "cache_write": cache_write, "cache_read": cache_read,
            "output": OUTPUT_TOKENS}


@dataclass
class Step:
    tool: str | None                  # None: the final answer
    args: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    fail: tuple[int, dict[str, Any]] | None = None    # answered once before the step is played


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def offers_tools(self) -> bool:
        return _offers_tools(self)


def _count_results(path: str, body: dict[str, Any]) -> int:
    if path.endswith("/messages"):
        return sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
                   for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result")
    if path.endswith("/chat/completions"):
        return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    return sum(1 for it in body.get("input", []) if isinstance(it, dict)
               and it.get("type") in ("function_call_output", "custom_tool_call_output"))


class ScriptedProvider:
    def __init__(self, steps: list[Step]):
        self.steps = steps
        self.received: list[Received] = []
        self.usages: dict[int, dict[str, int]] = {}    # index in `received` -> the usage answered
        self.failed: set[int] = set()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    # -- life ------------------------------------------------------------------------------------
    def __enter__(self) -> "ScriptedProvider":
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        app = web.Application(client_max_size=256 << 20)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def main_requests(self) -> list[Received]:
        return [r for r in self.received if r.path.split("?")[0].endswith(("/messages", "/chat/completions", "/responses"))
                and _offers_tools(r)]

    # -- answering ---------------------------------------------------------------------------------
    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append(Received(request.path_qs, dict(request.headers), body))
        path = request.path
        if path.endswith("/count_tokens"):
            return web.json_response({"input_tokens": 4242})
        if path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        try:
            req = json.loads(body)
        except ValueError:
            return web.json_response({"error": {"message": "not JSON"}}, status=400)
        if not _offers_tools(self.received[-1]):
            return await self._answer(request, path, req, Step(None, text="ok"))
        k = _count_results(path, req)
        step = self.steps[min(k, len(self.steps) - 1)]
        if step.fail is not None and k not in self.failed:
            self.failed.add(k)
            status, payload = step.fail
            return web.json_response(payload, status=status)
        return await self._answer(request, path, req, step, k)

    async def _answer(self, request, path: str, req: dict[str, Any], step: Step, k: int = 0):
        wire = "anthropic" if path.endswith("/messages") else "chat" if path.endswith("/chat/completions") else "responses"
        usage = self.usages[len(self.received) - 1] = usage_for(self.received[-1].body)
        events = getattr(self, f"_{wire}")(req, step, f"call_{k}_{len(self.received)}", usage)
        if req.get("stream"):
            out = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
            await out.prepare(request)
            for name, data in events["stream"]:
                line = (f"event: {name}\n" if name else "") + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
                await out.write(line.encode())
                await asyncio.sleep(0)
            await out.write_eof()
            return out
        return web.json_response(events["whole"])

    def _anthropic(self, req, step: Step, call_id: str, u: dict[str, int]) -> dict[str, Any]:
        usage = {"input_tokens": u["input"], "cache_creation_input_tokens": u["cache_write"],
                 "cache_read_input_tokens": u["cache_read"], "output_tokens": u["output"]}
        content = [{"type": "text", "text": step.text or "Working on it."}]
        if step.tool:
            content.append({"type": "tool_use", "id": f"toolu_{call_id}", "name": step.tool, "input": step.args})
        stop = "tool_use" if step.tool else "end_turn"
        whole = {"id": f"msg_{call_id}", "type": "message", "role": "assistant", "model": req.get("model"), "content": content,
                 "stop_reason": stop, "stop_sequence": None, "usage": usage}
        start_usage = {**usage, "output_tokens": 1}
        stream: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": {
            **whole, "content": [], "stop_reason": None, "usage": start_usage}})]
        for i, block in enumerate(content):
            if block["type"] == "text":
                stream.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                       "content_block": {"type": "text", "text": ""}}))
                for piece in (block["text"][:5], block["text"][5:]):
                    stream.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                           "delta": {"type": "text_delta", "text": piece}}))
            else:
                stream.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}}))
                text = json.dumps(block["input"])
                for piece in (text[:7], text[7:]):
                    stream.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                           "delta": {"type": "input_json_delta", "partial_json": piece}}))
            stream.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        stream.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                         "usage": {"output_tokens": u["output"]}}))
        stream.append(("message_stop", {"type": "message_stop"}))
        return {"whole": whole, "stream": stream}


def _offers_tools(r: Received) -> bool:
    try:
        return bool(json.loads(r.body).get("tools"))
    except (ValueError, AttributeError):
        return False


CONTEXT_LENGTH_ANTHROPIC = (400, {"type": "error", "error": {
    "type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
OVERLOADED_ANTHROPIC = (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
