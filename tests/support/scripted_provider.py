"""A scripted provider on 127.0.0.1 speaking the three wires the proxy speaks (Anthropic Messages, OpenAI
Chat Completions, OpenAI Responses), streaming or not, for the proxy's tests and the real agents.

The main conversation (a request that offers tools) is played from a script of steps: each step is a
tool call (or the final answer), one per main request answered; side
requests (no tools: a title, a topic check) get a short text. A step may fail once first with a given
status and body (an overload, a context-length error), which the agent's own retry goes through.
Every request is kept as received: path, headers, body bytes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

OUTPUT_TOKENS = 37


def usage_for(body: bytes) -> dict[str, int]:
    """Figures that grow with the request, as a provider's do: a quarter of its bytes, most read from the cache.
    A Responses request's reasoning items from before its last user message are not billed: OpenAI's models keep
    only the current turn's reasoning in context unless the request asks `reasoning.context: "all_turns"`
    (GPT-5.6 and newer), and the client sends them all back (Codex 0.171 does)."""
    total = (len(body) - _dropped_reasoning(body)) // 4
    cache_read, cache_write = total * 2 // 3, total // 6
    return {"input": total - cache_read - cache_write, "cache_write": cache_write, "cache_read": cache_read,
            "output": OUTPUT_TOKENS}


def _dropped_reasoning(body: bytes) -> int:
    """Bytes of the reasoning items a Responses request carries from before its last user message, as sent
    (compact JSON, as Codex writes it)."""
    if b'"reasoning"' not in body:
        return 0
    try:
        req = json.loads(body)
    except ValueError:
        return 0
    items = req.get("input") if isinstance(req, dict) else None
    if not isinstance(items, list) or (req.get("reasoning") or {}).get("context") == "all_turns":
        return 0
    last_user = max((i for i, it in enumerate(items) if isinstance(it, dict) and it.get("role") == "user"), default=-1)
    return sum(len(json.dumps(it, separators=(",", ":"), ensure_ascii=False).encode()) for it in items[:last_user]
               if isinstance(it, dict) and it.get("type") == "reasoning")


@dataclass
class Step:
    tool: str | None                  # None: the final answer
    args: dict[str, Any] = field(default_factory=dict)
    text: str = ""
    fail: tuple[int, dict[str, Any]] | None = None    # answered once before the step is played
    delay: float = 0.0                # seconds the reply's stream pauses after its first event (a model thinking)
    gap: float = 0.0                  # seconds between each two of its later events (a model writing slowly)
    tail: float = 0.0                 # seconds between the stream's last event and its end
    reasoning: str = ""               # Responses wire: a reasoning item (summary + encrypted content) leads the reply


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


class ScriptedProvider:
    def __init__(self, steps: list[Step], side_text: str = "ok"):
        self.steps = steps
        self.side_text = side_text      # the answer to a request that offers no tools
        self.received: list[Received] = []
        self.usages: dict[int, dict[str, Any]] = {}    # index in `received` -> the usage object answered
        self.failed: set[int] = set()
        self.played = 0
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
            return await self._answer(request, path, req, Step(None, text=self.side_text))
        # the step is the number of main requests answered so far, not read from the request: a compacted
        # request may carry fewer tool results than the conversation has had
        k = self.played
        step = self.steps[min(k, len(self.steps) - 1)]
        if step.fail is not None and k not in self.failed:
            self.failed.add(k)
            status, payload = step.fail
            return web.json_response(payload, status=status)
        self.played += 1
        return await self._answer(request, path, req, step, k)

    async def _answer(self, request, path: str, req: dict[str, Any], step: Step, k: int = 0):
        wire = "anthropic" if path.endswith("/messages") else "chat" if path.endswith("/chat/completions") else "responses"
        at = len(self.received) - 1
        events = getattr(self, f"_{wire}")(req, step, f"call_{k}_{len(self.received)}", usage_for(self.received[-1].body))
        self.usages[at] = events["whole"]["usage"]
        if req.get("stream"):
            out = web.StreamResponse(headers={"content-type": "text/event-stream", "cache-control": "no-cache"})
            await out.prepare(request)
            for k, (name, data) in enumerate(events["stream"]):
                line = (f"event: {name}\n" if name else "") + f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"
                await out.write(line.encode())
                await asyncio.sleep(step.delay if k == 0 else step.gap)
            await asyncio.sleep(step.tail)
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

    def _chat(self, req, step: Step, call_id: str, u: dict[str, int]) -> dict[str, Any]:
        usage = {"prompt_tokens": u["input"] + u["cache_read"] + u["cache_write"], "completion_tokens": u["output"],
                 "total_tokens": u["input"] + u["cache_read"] + u["cache_write"] + u["output"],
                 "prompt_tokens_details": {"cached_tokens": u["cache_read"], "cache_write_tokens": u["cache_write"]}}
        text = step.text or "Working on it."
        calls = [{"id": f"call_{call_id}", "type": "function",
                  "function": {"name": step.tool, "arguments": json.dumps(step.args)}}] if step.tool else []
        stop = "tool_calls" if calls else "stop"
        base = {"id": f"chatcmpl-{call_id}", "object": "chat.completion", "created": 1, "model": req.get("model")}
        whole = {**base, "choices": [{"index": 0, "finish_reason": stop, "message": {
            "role": "assistant", "content": text, **({"tool_calls": calls} if calls else {})}}], "usage": usage}
        chunk = {**base, "object": "chat.completion.chunk"}
        stream: list[tuple[str | None, Any]] = [
            (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text[:5]}}]}),
            (None, {**chunk, "choices": [{"index": 0, "delta": {"content": text[5:]}}]})]
        for k, c in enumerate(calls):
            args = c["function"]["arguments"]
            stream.append((None, {**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": k, "id": c["id"], "type": "function", "function": {"name": c["function"]["name"], "arguments": args[:6]}}]}}]}))
            stream.append((None, {**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": k, "function": {"arguments": args[6:]}}]}}]}))
        stream.append((None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": stop}]}))
        stream.append((None, {**chunk, "choices": [], "usage": usage}))
        stream.append((None, "[DONE]"))
        return {"whole": whole, "stream": stream}

    def _responses(self, req, step: Step, call_id: str, u: dict[str, int]) -> dict[str, Any]:
        prompt = u["input"] + u["cache_read"] + u["cache_write"]
        text = step.text or "Working on it."
        output: list[dict[str, Any]] = [{"type": "message", "id": f"msg_{call_id}", "status": "completed", "role": "assistant",
                                         "content": [{"type": "output_text", "text": text, "annotations": []}]}]
        reasoning = 0
        if step.reasoning:
            item = reasoning_item(call_id, step.reasoning)
            output.insert(0, item)
            # what the item costs when the client sends it back: this provider bills a quarter of the bytes
            reasoning = len(json.dumps(item["encrypted_content"])) // 4
        usage = {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": u["cache_read"]},
                 "output_tokens": u["output"] + reasoning, "output_tokens_details": {"reasoning_tokens": reasoning},
                 "total_tokens": prompt + u["output"] + reasoning}
        if step.tool:
            output.append({"type": "function_call", "id": f"fc_{call_id}", "status": "completed", "call_id": f"call_{call_id}",
                           "name": step.tool, "arguments": json.dumps(step.args)})
        response = {"id": f"resp_{call_id}", "object": "response", "created_at": 1, "status": "completed",
                    "model": req.get("model"), "output": output, "usage": usage}
        stream: list[tuple[str, Any]] = [("response.created", {"type": "response.created", "sequence_number": 0,
                                                              "response": {**response, "status": "in_progress", "output": [], "usage": None}})]
        for k, item in enumerate(output):
            stream.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": k,
                                                          "item": {**item, "status": "in_progress"}}))
            if item["type"] == "message":
                for piece in (text[:5], text[5:]):
                    stream.append(("response.output_text.delta", {"type": "response.output_text.delta", "output_index": k,
                                                                  "item_id": item["id"], "content_index": 0, "delta": piece}))
            stream.append(("response.output_item.done", {"type": "response.output_item.done", "output_index": k, "item": item}))
        stream.append(("response.completed", {"type": "response.completed", "response": response}))
        return {"whole": response, "stream": stream}


def reasoning_item(call_id: str, summary: str) -> dict[str, Any]:
    """A Responses reasoning item as OpenAI returns one: a short summary, the reasoning itself encrypted (an
    opaque base64 blob the client can only send back)."""
    blob = base64.b64encode(hashlib.sha256(call_id.encode()).digest() * 48).decode()
    return {"type": "reasoning", "id": f"rs_{call_id}", "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": blob}


def _offers_tools(r: Received) -> bool:
    try:
        return bool(json.loads(r.body).get("tools"))
    except (ValueError, AttributeError):
        return False


CONTEXT_LENGTH_ANTHROPIC = (400, {"type": "error", "error": {
    "type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
OVERLOADED_ANTHROPIC = (529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
CONTEXT_LENGTH_OPENAI = (400, {"error": {"message": "This model's maximum context length is 128000 tokens. However, "
                                                 "your messages resulted in 131000 tokens.", "type": "invalid_request_error",
                                      "param": "messages", "code": "context_length_exceeded"}})
SERVER_ERROR_OPENAI = (500, {"error": {"message": "The server had an error while processing your request.",
                                       "type": "server_error", "param": None, "code": None}})
