"""The exact figures of a plan's requests, kept between runs (issue 38), so that a reopened session does
not work them out again.

A reopen replays every request of the session, and near the limits each plan measures a few request
shapes exactly (core/fold/meter.py `measure`): the tokenizer's count of a head and of the sanitized
messages at a stage level, and their lower bound. The count store already holds each text's count, but
summing them (building each stage's form of a message, looking its count up, prefix sums per level)
was ~1.3 s of a 20,000-message reopen that the heuristic does not pay. These figures are pure functions
of what a plan measures, so they are kept by its content:

- a plan's key: the source of breakwater/core (every rule a figure follows: the sanitizer, the stage
  forms, how a message is counted), the policy, the pins, and a chain of the content of every sanitized
  message entered so far (`Index.content_key`); the counter's encoding and engine are the count store's
  namespace;
- within it, a request shape: its head's content, the stage levels and where each applies;
- the figures: the lower bound of the far history, the lower bound of the rest, the exact count (each
  kept once worked out; a shape's bound alone may be asked for).

They are kept as one record a plan in the count store (core/log/count_store.py: safe between processes,
bounded, checked, a damaged file rebuilt). A plan whose record is missing (first open, evicted, another
policy) works its figures out as before: what is kept changes no figure, only whether it is summed again.
"""

from __future__ import annotations

import functools
import sys
from array import array
from pathlib import Path

import xxhash

from breakwater.core.log.message import Message, ToolCall

RECORD_VERSION = 1   # the layout of a record, and of the keys (part of `code_key`)
# plans a record holds: the plans of a session near its limits, in order, BATCH_PLANS to a record, so that a
# run looks one record up for each BATCH_PLANS plans (one a plan cost 17-30 µs: 0.16-0.28 s at 20,000 messages)
BATCH_PLANS = 64
FIELDS = 10          # a shape: head key, level, start, near_start, n, lower, boundary; its three figures
UNKNOWN = -1         # a figure not worked out yet
HEADS_KEPT = 64      # heads whose keys are kept (a session has one or two at a time: the cut's frame)
KEPT_FROM_TOKENS = 64   # a session's figures are kept when its messages average this many heuristic tokens

_digest = xxhash.xxh3_128_digest


@functools.cache
def code_key() -> bytes | None:
    """A digest of breakwater/core's source: a figure kept by one version is found by that version only.
    None when the source cannot be read (nothing is kept then)."""
    root = Path(__file__).resolve().parents[1]
    h = xxhash.xxh3_128(f"kept-measures {RECORD_VERSION} {sys.byteorder}\0".encode())
    try:
        for path in sorted(root.rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes())
    except OSError:
        return None
    return h.digest()


def message_key(msg: Message, sources: tuple[str, ...] | list[str], call: ToolCall | None) -> bytes:
    """A digest of everything a count or a stage form of `msg` reads: the message whole, the log
    messages it stands for (pins name them) and the call a result answers (its forms name it).

    The texts go in as their UTF-8 and the rest as reprs, by Python: a C library that reads a str as
    UTF-8 (msgspec, xxhash given a str) leaves CPython a copy inside every str that is not ASCII for as
    long as it lives (with msgspec: +20-30 MB peak on the 5k bench session)."""
    h = xxhash.xxh3_128(msg.content.encode("utf-8", "surrogatepass"))
    fields = f"{msg.id!r} {msg.role!r} {msg.tool_call_id!r} {msg.name!r} {msg.turn} {len(msg.content)} {tuple(sources)!r} " \
             f"{msg.meta!r}"
    for c in msg.tool_calls:
        h.update(c.arguments.encode("utf-8", "surrogatepass"))
        fields += f" {c.id!r} {c.name!r} {len(c.arguments)}"
    if call is not None:
        h.update(call.arguments.encode("utf-8", "surrogatepass"))
        fields += f" answers {call.id!r} {call.name!r} {len(call.arguments)}"
    h.update(fields.encode("utf-8", "surrogatepass"))
    return h.digest()


def encode(batch: dict[bytes, dict | bytes]) -> bytes:
    """A record: for each plan, its key, how many numbers follow, and its shapes' numbers (FIELDS each)."""
    parts = []
    for key, entries in batch.items():
        if type(entries) is bytes:   # as read, not used since
            flat = entries
        else:
            numbers = array("q")
            for shape, figures in entries.items():
                numbers.extend(shape)
                numbers.extend(figures)
            flat = numbers.tobytes()
        parts += (key, (len(flat) // 8).to_bytes(8, "little"), flat)
    return b"".join(parts)


def decode(blob: bytes) -> dict[bytes, bytes] | None:
    """A record's plans, each plan's numbers as read (`shapes` reads them when the plan comes); None when
    it is not a record this module wrote (never trusted)."""
    batch, pos, size = {}, 0, len(blob)
    while pos < size:
        if pos + 24 > size:
            return None
        key, m = blob[pos:pos + 16], int.from_bytes(blob[pos + 16:pos + 24], "little")
        pos += 24
        if m % FIELDS or pos + 8 * m > size:
            return None
        batch[key] = blob[pos:pos + 8 * m]
        pos += 8 * m
    return batch


def shapes(flat: bytes) -> dict[tuple, list[int]]:
    numbers = array("q", flat).tolist()
    return {tuple(numbers[i:i + 7]): numbers[i + 7:i + FIELDS] for i in range(0, len(numbers), FIELDS)}


class KeptMeasures:
    """The records of one pipeline's plans (`Meter` asks `figures` for each shape it measures exactly)."""

    def __init__(self, index, counter, policy) -> None:
        self.index = index
        self.counter = counter
        self._store = None
        self._code = b""
        self._looked = False          # whether the store was asked for (only a plan near the limits does)
        self._policy_key = _digest(repr(policy).encode())
        self._plan: bytes | None = None        # the key of the plan measuring, and its shapes
        self._entries: dict[tuple, list[int]] = {}
        self._batch_key: bytes | None = None   # the record it is in: the key of its first plan, and its plans
        self._batch: dict[bytes, dict | bytes] = {}
        self._put: tuple = ()                  # (record key, the store's record writes) when last put
        self._heads: dict[int, tuple[list[Message], int]] = {}
        # index.entered and pins_version when the plan's key was worked out: content and pins change only
        # between plans, which measure ~4 shapes each
        self._entered = self._pins_version = -1
        self._head: list[Message] | None = None   # the head measured last, and its key
        self._head_id = 0

    def copy(self, index) -> KeptMeasures:
        new = KeptMeasures.__new__(KeptMeasures)
        new.__dict__.update(vars(self), index=index, _plan=None, _entries={}, _batch_key=None, _batch={}, _heads={},
                            _entered=-1, _pins_version=-1, _head=None, _head_id=0, _put=())
        return new

    def retune(self, policy) -> None:
        self._policy_key, self._entered = _digest(repr(policy).encode()), -1

    def figures(self, head: list[Message], shape: tuple[int, ...]) -> list[int]:
        """[far bound, rest bound, exact count] of `shape` (level, start, near_start, n, lower, boundary)
        after `head`, UNKNOWN where not kept: the caller fills those it works out and calls `changed`."""
        index = self.index
        if index.entered != self._entered or index.pins_version != self._pins_version:   # a new plan
            store = self._open()
            if store is None:
                return [UNKNOWN, UNKNOWN, UNKNOWN]
            key = self._plan_key()
            if key != self._plan:
                self._enter(store, key)
        if head is not self._head:
            hit = self._heads.get(id(head))
            self._head, self._head_id = head, hit[1] if hit is not None and hit[0] is head else self._head_key(head)
        full = (self._head_id,) + shape
        got = self._entries.get(full)
        if got is None:
            got = self._entries[full] = [UNKNOWN, UNKNOWN, UNKNOWN]
        return got

    def _enter(self, store, key: bytes) -> None:
        """Find the shapes of plan `key`: in the record read or being written; else, when that one is full
        (or there is none), in the record it starts, looked up. A run that plans as an earlier one did
        looks up the same records: one for each BATCH_PLANS plans, on a first open and a reopen alike."""
        self._plan = key
        entries = self._batch.get(key)
        if entries is None:
            if self._batch_key is not None and len(self._batch) < BATCH_PLANS:
                entries = self._batch[key] = {}   # a new plan, added to the record it follows
            else:
                blob = store.get_record(key)
                batch = decode(blob) if blob is not None else None
                if batch is not None and key in batch:
                    self._batch_key, self._batch = key, batch
                    entries = batch[key]
                else:
                    self._batch_key, self._batch = key, {}
                    entries = self._batch[key] = {}
        if type(entries) is bytes:
            entries = self._batch[key] = shapes(entries)
        self._entries = entries

    def changed(self) -> None:
        """A figure of the plan was worked out: its record is written (again) at the store's next write.
        Put once until the store writes records: it encodes the record as it is then."""
        store = self._store
        if store is None or self._batch_key is None:
            return
        if self._put != (self._batch_key, store.record_writes):
            writes = store.record_writes   # before: a write within `put_record` must be followed by another
            store.put_record(self._batch_key, functools.partial(encode, self._batch))
            self._put = (self._batch_key, writes)

    def _open(self):
        """The store, at the first shape measured exactly; None when nothing is kept. A session of short
        messages keeps nothing: summing them is cheap (a chat's two new messages a plan), keeping them was
        not (200,000 tiny messages: a record a plan cost 1.3 s more on a first open, for 0.3 s less on a
        reopen). Decided once, from the messages entered by then: the same plan of every run of the
        session decides it, so that a reopen keeps figures exactly when the first open did."""
        if not self._looked:
            self._looked = True
            code, ledger = code_key(), self.index.ledger
            if code is not None and ledger.prefix[-1] >= KEPT_FROM_TOKENS * len(ledger.tok0):
                self._code, self._store = code, self.counter.store()
        return self._store

    def _plan_key(self) -> bytes:
        """The key of the plan's record (a plan measures ~4 shapes: worked out once for them)."""
        index = self.index
        pins = "\0".join(sorted(index.pins)).encode() if index.pins else b""
        key = _digest(self._code + self._policy_key + _digest(pins) + index.content_key())
        self._entered, self._pins_version = index.entered, index.pins_version
        return key

    def _head_key(self, head: list[Message]) -> int:
        if len(self._heads) >= HEADS_KEPT:
            self._heads.clear()
        key = xxhash.xxh3_64_intdigest(b"".join(message_key(m, (), None) for m in head)) - (1 << 63)
        self._heads[id(head)] = (head, key)
        return key
