"""The judge's line to its model (`eval --judge`, issue 35 item 6): each call bounded as a whole in time,
and every reply in size.

The client's own timeout bounds each read, so a server that sends a byte every few seconds kept a call
waiting for ever; here the real `openai.AsyncOpenAI` is awaited under `asyncio.timeout`, which cancels
the call where it stands (headers or body) at the deadline. A reply is read through a transport that
stops at MAX_REPLY_BYTES (a 300 MB reply was taken whole, 1.6 GB of memory) and asks for it
uncompressed: a compressed reply, which could unpack to any size, is refused.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import httpx2
import openai

MAX_REPLY_BYTES = 1 << 20   # an answer of 600 tokens and a grade of 200 are a few KB with their envelope

T = TypeVar("T")


class CallCut(Exception):
    """A call the judge ended itself: past its deadline, or a reply too large. One line for the user."""

    def __init__(self, message: str, *, retry: bool):
        super().__init__(message)
        self.retry = retry   # worth asking again (a deadline passed), or not (the same reply would come)


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, stream: Any, limit: int):
        self._stream = stream
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._stream:
            seen += len(chunk)
            if seen > self._limit:
                raise _too_large(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()


def _too_large(limit: int) -> CallCut:
    return CallCut(f"the reply was larger than {limit >> 20} MiB, far more than an answer; refused", retry=False)


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose replies stop at `limit` bytes, as they arrive."""

    def __init__(self, limit: int):
        self._inner = httpx2.AsyncHTTPTransport()
        self._limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        declared = response.headers.get("content-length", "")
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if (declared.isdigit() and int(declared) > self._limit) or encoding not in ("", "identity"):
            await response.aclose()
            if encoding not in ("", "identity"):
                raise CallCut(f"the reply came compressed ({encoding[:20]}) though it was asked for uncompressed; "
                              "refused", retry=False)
            raise _too_large(self._limit)
        return httpx2.Response(response.status_code, headers=response.headers,
                               stream=_Capped(response.stream, self._limit), extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


def judge_client(base_url: str | None, api_key: str | None, timeout: float,
                 limit: int = MAX_REPLY_BYTES) -> openai.AsyncOpenAI:
    """The client the judge asks with: the real one, on a transport that bounds every reply."""
    http = httpx2.AsyncClient(transport=_BoundedTransport(limit), timeout=timeout, follow_redirects=True,
                              headers={"Accept-Encoding": "identity"})
    return openai.AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout, http_client=http)


class Deadline:
    """Runs the judge's calls from its synchronous loop, each to its end or to `seconds` after it began."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._runner = asyncio.Runner()

    def run(self, call: Callable[[], Awaitable[T]]) -> T:
        async def bounded() -> T:
            async with asyncio.timeout(self.seconds):
                return await call()
        try:
            return self._runner.run(bounded())
        except TimeoutError:
            raise CallCut(f"no complete reply within {self.seconds:g} s (--judge-timeout)", retry=True) from None

    def close(self, client: openai.AsyncOpenAI) -> None:
        try:
            self._runner.run(client.close())
        finally:
            self._runner.close()
