"""The scribe: a background worker that writes memory without slowing the agent loop.

Seed 000 §8.4.1: the loop hands over a snapshot every few turns (or at the soft limit)
through a queue that holds two; when it is full the snapshot is skipped, never waited for.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Sequence

from breakwater.core.log.message import Message
from breakwater.memory.entries import bullet_key, clean_bullets
from breakwater.memory.extract import Extractor, extract
from breakwater.memory.store import MemoryStore

log = logging.getLogger(__name__)

QUEUE_SIZE = 2
_STOP = object()


class Scribe:
    def __init__(self, store: MemoryStore, *, extractor: Extractor = extract, every_turns: int = 5) -> None:
        self.store = store
        self.extractor = extractor
        self.every_turns = every_turns
        self.offered = 0
        self.skipped = 0
        self.written = 0
        self.failures = 0
        self.last_error: str | None = None
        self._last_offered_turn: int | None = None
        self._seen: set[tuple[str, str]] = set()  # bullets this session already wrote
        self._queue: queue.Queue = queue.Queue(maxsize=QUEUE_SIZE)
        self._closed = False
        self._stop_sent = False
        self._thread = threading.Thread(target=self._run, name="breakwater-scribe", daemon=True)
        self._thread.start()

    def offer(self, turn: int, messages: Sequence[Message]) -> bool:
        """Hand a snapshot to the worker; False (and counted as skipped) if the queue is full."""
        if self._closed:
            return False
        try:
            self._queue.put_nowait((turn, list(messages)))
        except queue.Full:
            self.skipped += 1
            return False
        self.offered += 1
        self._last_offered_turn = turn
        return True

    def maybe_offer(self, turn: int, messages: Sequence[Message], at_soft_limit: bool = False) -> bool:
        """Offer every `every_turns` turns, or whenever the context is at the soft limit."""
        last = self._last_offered_turn
        if last == turn:
            return False
        if not at_soft_limit and turn - (0 if last is None else last) < self.every_turns:
            return False
        return self.offer(turn, messages)

    def close(self, timeout: float = 10.0) -> bool:
        """Write what is queued, then stop; True if the worker finished within `timeout`."""
        self._closed = True
        deadline = time.monotonic() + timeout
        if not self._stop_sent:
            try:
                self._queue.put(_STOP, timeout=timeout)
            except queue.Full:  # the worker is stuck on a snapshot; a later close() can retry
                return False
            self._stop_sent = True
        self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            turn, messages = item
            try:
                self._write(turn, messages)
            except Exception as exc:  # noqa: BLE001 - a failed note must not kill the worker
                self.failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("memory scribe failed at turn %s: %s", turn, self.last_error)

    def _write(self, turn: int, messages: list[Message]) -> None:
        # A later snapshot repeats what an earlier one held; write only what is new.
        fresh = []
        for line in clean_bullets(self.extractor(messages)):
            key = bullet_key(line)
            if key not in self._seen:
                fresh.append(line)
        if not fresh:
            return
        for aside in self.store.append("\n".join(fresh), turn).set_aside:
            log.warning("memory scribe at turn %s: %s", turn, aside)
        self._seen.update(bullet_key(ln) for ln in fresh)
        self.written += 1
