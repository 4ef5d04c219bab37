"""Edit and View: what the pipeline did, and what it sends."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter
from typing import Any

from breakwater.core.log.message import Message

KINDS = ("truncated-at-source", "snipped", "masked", "folded", "microcompacted", "summarized", "dropped",
         "merged", "stripped", "truncated-argument")
# each kind's short badge label and what it means: the workbench's list, legend and help screen and
# the exported pages all name the kinds from this one table
KIND_INFO: dict[str, tuple[str, str]] = {
    "truncated-at-source": ("src", "tool output cut at the source (rolling buffer); the full stream is in the spill file"),
    "snipped": ("snip", "long tool output kept as head + marker + tail"),
    "masked": ("mask", "old tool output replaced by a one-line notice"),
    "folded": ("fold", "old assistant text folded"),
    "microcompacted": ("micro", "a far tool exchange reduced to a skeleton line"),
    "summarized": ("sum", "replaced by a deep-compaction summary"),
    "dropped": ("drop", "left out to fit the window (shape history) or invalid"),
    "merged": ("merge", "joined with the message of the same role next to it, so that turns alternate"),
    "stripped": ("strip", "orphaned tool call or result removed"),
    "truncated-argument": ("arg", "an over-long tool-call argument cut to head + tail"),
}
ALL_KINDS: tuple[str, ...] = tuple(KINDS) + tuple(k for k in KIND_INFO if k not in KINDS)


def kind_label(kind: str) -> str:
    return KIND_INFO.get(kind, (kind[:5], ""))[0]


def kind_meaning(kind: str) -> str:
    return KIND_INFO.get(kind, ("", kind))[1]


@dataclass(frozen=True, slots=True)
class Edit:
    """One change the pipeline made to one message of the log for one request.

    `spans` are the (start, end) character ranges of the original content that
    were replaced; `threshold` names the rule or limit that fired.
    """

    message_id: str
    stage: str
    kind: str
    spans: tuple[tuple[int, int], ...] = ()
    tokens_before: int = 0
    tokens_after: int = 0
    threshold: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "stage": self.stage, "kind": self.kind,
                "spans": [list(s) for s in self.spans], "tokens_before": self.tokens_before,
                "tokens_after": self.tokens_after, "threshold": self.threshold}


_message_id = attrgetter("message.id")


def _position(i: int, n: int) -> int:
    """Index `i` of a sequence of `n` as a position from the start (IndexError outside it)."""
    if not -n <= i < n:
        raise IndexError(i)
    return i % n


@dataclass(frozen=True, slots=True)
class _Index:
    """Where each id is in a stretch of the sanitized history. Built once (at C speed) and shared
    by every range that lies inside that stretch with the same messages: the ranges of the
    requests a step goes through are mostly the same history, so a step indexes nothing."""

    start: int                    # the stretch's first position in the sanitized history
    entries: Sequence[Any]
    ids: list[str]
    at: dict[str, int]            # id -> position in `entries` (its last one)
    repeats: dict[str, tuple[int, ...]]   # every position of an id that occurs more than once

    @classmethod
    def of(cls, start: int, entries: Sequence[Any]) -> "_Index":
        ids = list(map(_message_id, entries))
        at = dict(zip(ids, range(len(ids))))
        repeats: dict[str, tuple[int, ...]] = {}
        if len(at) != len(ids):
            where: dict[str, list[int]] = {}
            for k, mid in enumerate(ids):
                where.setdefault(mid, []).append(k)
            repeats = {mid: tuple(ks) for mid, ks in where.items() if len(ks) > 1}
        return cls(start, entries, ids, at, repeats)

    def serves(self, start: int, entries: Sequence[Any]) -> bool:
        o = start - self.start
        return 0 <= o and o + len(entries) <= len(self.entries) and entries == self.entries[o:o + len(entries)]


@dataclass(frozen=True, slots=True, eq=False)
class Covered(Sequence[Edit]):
    """Whole messages a request leaves out for one reason (the history a deep-compaction summary
    stands for, or what shape history dropped), kept as the range of the history they are: a
    request at 20,000 messages would otherwise build ~20,000 `Edit`s that hardly anyone reads.
    Iterating gives exactly those edits, in the order of the history.

    `entries` are the sanitized history from position `start` on (each with a `.message`),
    `tokens` their tokens as logged, `skip` the positions in `entries` the request keeps after all.
    """

    stage: str
    kind: str
    threshold: str
    start: int
    entries: Sequence[Any]
    tokens: Sequence[int]
    skip: frozenset[int] = frozenset()
    # the look-up by id, made when first asked for (`simulate --view` never asks)
    _index: list = field(default_factory=list, init=False, repr=False)

    def __len__(self) -> int:
        return len(self.entries) - len(self.skip)

    def __iter__(self) -> Iterator[Edit]:
        skip = self.skip
        for k in range(len(self.entries)):
            if k not in skip:
                yield self._edit(k)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i]
        return next(islice(iter(self), _position(i, len(self)), None))

    def _edit(self, k: int) -> Edit:
        m = self.entries[k].message
        return Edit(m.id, self.stage, self.kind, ((0, len(m.content)),), self.tokens[k], 0, self.threshold)

    def index(self, like: "Covered | None" = None) -> None:
        """Make the look-up by id (once): `like`'s, when this range lies inside the stretch of
        history it indexed and holds the same messages there."""
        if self._index:
            return
        shared = like._index[0] if like is not None and like._index else None
        if shared is None or not shared.serves(self.start, self.entries):
            shared = _Index.of(self.start, self.entries)
        self._index.append(shared)

    def _positions(self, message_id: str) -> tuple[int, ...]:
        self.index()
        ix: _Index = self._index[0]
        o = self.start - ix.start
        found = ix.repeats.get(message_id)
        if found is None:
            p = ix.at.get(message_id)
            found = () if p is None else (p,)
        n, skip = len(self.entries), self.skip
        return tuple(p - o for p in found if 0 <= p - o < n and p - o not in skip)

    def message_ids(self) -> tuple[str, ...]:
        """The ids of the messages covered, each once, in order."""
        self.index()
        ix: _Index = self._index[0]
        o = self.start - ix.start
        ids = ix.ids[o:o + len(self.entries)]
        for k in sorted(self.skip, reverse=True):
            del ids[k]
        return tuple(dict.fromkeys(ids) if ix.repeats else ids)

    def covers(self, message_id: str) -> bool:
        return bool(self._positions(message_id))

    def edits_of(self, message_id: str) -> list[Edit]:
        """This range's edits of one message (none, or one unless ids repeat)."""
        return [self._edit(k) for k in self._positions(message_id)]


class Edits(Sequence[Edit]):
    """The edits of one request in order: parts that are tuples of `Edit`s or `Covered` ranges,
    whose edits exist only while someone iterates over them."""

    __slots__ = ("parts",)

    def __init__(self, parts: Sequence[Sequence[Edit]] = ()):
        self.parts: tuple[Sequence[Edit], ...] = tuple(p for p in parts if len(p))

    def __len__(self) -> int:
        return sum(map(len, self.parts))

    def __iter__(self) -> Iterator[Edit]:
        for part in self.parts:
            yield from part

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i]
        i = _position(i, len(self))
        for part in self.parts:
            if i < len(part):
                return part[i]
            i -= len(part)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Edits, tuple, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"Edits({list(self)!r})"

    def counts(self) -> dict[str, int]:
        """Edits by kind, in the order kinds first occur."""
        counts: dict[str, int] = {}
        for part in self.parts:
            if isinstance(part, Covered):
                counts[part.kind] = counts.get(part.kind, 0) + len(part)
                continue
            for e in part:
                counts[e.kind] = counts.get(e.kind, 0) + 1
        return counts


def above_window(api_tokens: int | None, window: int) -> bool:
    """Whether the provider's own figure for a recorded request exceeds the window in use: the
    recording sent more than this window holds (a larger window then, or a provider that counts
    otherwise). simulate --json and the gauges both say it from here."""
    return api_tokens is not None and api_tokens > window


@dataclass(frozen=True, slots=True)
class View:
    """The messages for one request, the edits that shaped them, and the counts."""

    turn: int
    messages: tuple[Message, ...]
    edits: Edits
    raw_tokens: int          # the whole history before this request, uncompacted
    base_tokens: int         # after sanitize and persisted summaries: what decides the zone
    sent_tokens: int         # what is sent
    zone: str
    counted: str             # "exact" when the tokenizer's count decided the verdicts (fits), else "estimate"
    window: int
    soft_limit: int
    hard_limit: int
    api_tokens: int | None = None  # the last figure the API reported, if any
    fits: bool = True
    notes: tuple[str, ...] = field(default=())
    # estimate, counted as sent_tokens is: tokens at the start identical to the previous request,
    # what a provider's prompt cache can reuse; 0 for the first request
    stable_prefix_tokens: int = 0
    # the turn of the request api_tokens was reported for (an earlier one than this: the API answers
    # a request after it is sent), so a figure is never read as this request's own
    api_turn: int | None = None
    # the figure is the heuristic's line (≈ on screen), not the tokenizer's count: Plan.estimated
    estimated: bool = True

    def to_api(self) -> list[dict[str, Any]]:
        return [m.to_api() for m in self.messages]

    def edit_counts(self) -> dict[str, int]:
        return self.edits.counts()

    @property
    def api_above_window(self) -> bool:
        return above_window(self.api_tokens, self.window)
