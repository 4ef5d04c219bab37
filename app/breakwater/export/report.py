"""What an export shows, gathered once from the core: the figures of `simulate --json` (the same
Simulation object), the request at the chosen turn as the workbench's inspector sees it, every
deep compaction with what it covered and the facts lost with it, and the policy as a file."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from breakwater.core.compare import TurnDiff
from breakwater.core.log.edits import Edit
from breakwater.core.log.message import Message
from breakwater.core.log.session_log import SessionLog
from breakwater.core.log.tokens import heuristic_message
from breakwater.core.policy import Policy
from breakwater.core.policy.toml_file import dumps as policy_toml
from breakwater.core.replay import Replay
from breakwater.fidelity.probes import PINNED_KINDS
from breakwater.fidelity.results import FidelityRun
from breakwater.fidelity.background import replay_in_background

PAGE_CHARS = 2_400_000   # characters of message text on a page, shared out among the messages
MIN_CHARS, MAX_CHARS = 240, 12_000   # each side of one message gets this many at least and at most
PREVIEW_CHARS = 120
SPAN_KEEP = 160          # of a long replaced span, this much of its start and of its end is shown


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact of the session (fidelity/probes.py) the request no longer carries."""

    kind: str
    category: str
    text: str
    turn: int           # the first request that could carry it
    lost_turn: int      # the first request of the run that no longer does
    pinned: bool


@dataclass(frozen=True, slots=True)
class CompactionRow:
    turn: int
    id: str
    source: str         # "decided" by this policy, or "recorded" (the transcript's agent did it)
    trigger: str
    summarizer: str
    covered: int        # messages replaced by the summary
    tokens_before: int
    tokens_after: int
    summary: str
    lost: tuple[Fact, ...]


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One request of the timeline: the numbers `simulate --json` prints for it."""

    turn: int
    raw_tokens: int
    sent_tokens: int
    zone: str
    fits: bool
    counted: str
    compaction: str | None   # "decided", "recorded" or None


@dataclass(frozen=True, slots=True)
class Part:
    """A piece of a message's text: replaced by an edit of `kind` (None: untouched); `omitted`
    characters were left out after it (the page stays a few MB whatever the session holds)."""

    text: str
    kind: str | None = None
    omitted: int = 0


@dataclass(frozen=True, slots=True)
class MessageRow:
    """One message of the log at the chosen turn: as logged, and as sent (None when not sent)."""

    index: int
    turn: int
    role: str
    id: str
    raw_tokens: int          # ≈, the heuristic, as the workbench's list shows
    sent_tokens: int | None  # ≈; None after the request (a later message)
    kinds: tuple[str, ...]
    logged: tuple[Part, ...]     # as logged, the replaced ranges marked by kind
    sent: tuple[Part, ...] | None   # as sent; None when the request does not carry it
    calls: tuple[str, ...]       # "name(arguments)" of each tool call, as logged
    later: bool                  # comes after the chosen request
    preview: str                 # one line that says what the message is


@dataclass(frozen=True, slots=True)
class Side:
    """A session under one policy."""

    policy: Policy
    policy_file: str
    header: dict[str, Any]      # simulate --json's header (window, limits, model, prices, counter)
    totals: dict[str, Any]      # simulate --json's totals, the same object
    turns: tuple[TurnRow, ...]
    compactions: tuple[CompactionRow, ...]
    recall: float | None        # facts carried at the chosen turn
    pinned: float | None        # of them, the pinned ones
    missing: tuple[Fact, ...]   # facts not carried at the chosen turn
    facts: int                  # facts the session made up to the chosen turn


@dataclass(frozen=True, slots=True)
class Report:
    title: str
    source: str               # the file's name and its format
    turn: int                 # the chosen request
    turns: int
    messages: tuple[MessageRow, ...]
    a: Side
    b: Side | None = None
    differs: tuple[TurnDiff, ...] = field(default=())   # with b: the turns where the two send differently


def _facts(run: FidelityRun, turn: int) -> tuple[Fact, ...]:
    return tuple(Fact(p.kind, p.category, p.text, p.turn, lost, p.kind in PINNED_KINDS)
                 for p, lost in sorted(run.missing_at(turn),
                                          key=lambda pl: (pl[0].kind not in PINNED_KINDS, -pl[1], pl[0].turn, pl[0].id)))


def _side(replay: Replay, run: FidelityRun, turn: int) -> Side:
    sim = replay.simulation
    turns = tuple(TurnRow(t.turn, t.raw_tokens, t.sent_tokens, t.zone, t.fits, t.counted,
                          t.compaction_source if t.compaction else None) for t in sim.turns)
    known = replay.compactions()
    rows = []
    for t in sim.turns:
        comp = known.get(t.compaction) if t.compaction else None
        if comp is None:
            continue
        lost = tuple(Fact(p.kind, p.category, p.text, p.turn, t.turn, p.kind in PINNED_KINDS)
                     for p in run.lost_at(t.turn))
        rows.append(CompactionRow(t.turn, comp.id, t.compaction_source or "decided", comp.trigger, comp.summarizer,
                                  comp.covered, comp.tokens_before, comp.tokens_after, comp.summary, lost))
    facts = sum(1 for p in run.probes if p.live_at(turn))
    return Side(replay.policy, policy_toml(replay.policy), sim.header_json(), sim.totals_json(), turns, tuple(rows),
                run.recall_at(turn), run.pinned_at(turn), _facts(run, turn), facts)


def _clip(text: str, budget: int, kind: str | None = None) -> list[Part]:
    """`text` within `budget` characters: its start and end, what is left out counted."""
    if len(text) <= budget:
        return [Part(text, kind)] if text else []
    head = budget * 2 // 3
    tail = budget - head
    return [Part(text[:head], kind, len(text) - head - tail), Part(text[len(text) - tail:], kind)]


def _marked(text: str, edits: list[Edit], budget: int) -> tuple[Part, ...]:
    """The logged text in parts, each replaced range marked with its edit's kind; a long range keeps
    only its ends (it is what was cut: its size is the point), the rest shares the budget."""
    spans = sorted((s, e, edit.kind) for edit in edits for s, e in edit.spans if e > s and s < len(text))
    parts: list[Part] = []
    at = 0
    plain = sum(max(0, s - at) for s, _, _ in spans) + len(text) - (spans[-1][1] if spans else 0)
    share = budget if not spans else max(MIN_CHARS, budget - SPAN_KEEP * 2 * len(spans))
    for s, e, kind in spans:
        if s < at:
            continue
        if s > at:
            parts += _clip(text[at:s], max(1, share * (s - at) // max(1, plain)))
        parts += _clip(text[s:e], 2 * SPAN_KEEP, kind)
        at = e
    if at < len(text):
        parts += _clip(text[at:], max(1, share * (len(text) - at) // max(1, plain)))
    return tuple(parts)


def _preview(m: Message) -> str:
    text = " ".join(m.content[:PREVIEW_CHARS * 2].split())
    if m.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments[:60]})" for c in m.tool_calls)
        text = f"{text} → {calls}" if text else f"→ {calls}"
    return text[:PREVIEW_CHARS]


def _messages(replay: Replay, turn: int) -> tuple[MessageRow, ...]:
    detail = replay.detail(turn)
    messages = replay.log.messages
    budget = max(MIN_CHARS, min(MAX_CHARS, PAGE_CHARS // max(1, 2 * len(messages))))
    rows = []
    for i, m in enumerate(messages):
        later = i >= detail.history
        sent = None if later else detail.sent_by_id.get(m.id)
        edits = [] if later else detail.edits_by_id.get(m.id, [])
        rows.append(MessageRow(i + 1, m.turn, m.role, m.id, heuristic_message(m),
                               None if later else (heuristic_message(sent) if sent is not None else 0),
                               () if later else tuple(detail.kinds(m.id)), _marked(m.content, edits, budget),
                               None if sent is None else tuple(_clip(sent.content, budget)),
                               tuple(f"{c.name}({c.arguments[:MIN_CHARS]})" for c in m.tool_calls), later,
                               _preview(m)))
    return tuple(rows)


def _never() -> bool:
    return False


def build(log: SessionLog, policy: Policy, counter: str = "exact", model: str | None = None, turn: int | None = None,
          window_source: str = "policy", other: Policy | None = None, other_window_source: str = "policy") -> Report:
    """The report of `log` under `policy` at request `turn` (default: the last), and beside it under
    `other` when given."""
    replays = [Replay(log, policy, counter, model, window_source=window_source)]
    if other is not None:
        replays.append(Replay(log, other, counter, model, tokens=replays[0]._tokens(),
                              window_source=other_window_source))
    total = log.turn_count()
    chosen = total if turn is None else max(1, min(turn, max(total, 1)))
    # the facts take a second pass over the session: it runs in a process of its own on the other
    # core while this one replays (5,000 messages: ~1.6 s of CPU each)
    with ThreadPoolExecutor(len(replays)) as pool:
        facts = [pool.submit(replay_in_background, log, r.policy, counter, model, _never, nice=0) for r in replays]
        for r in replays:
            r.run(focus=chosen)
        sides = [_side(r, f.result(), chosen) for r, f in zip(replays, facts)]
    differs: tuple[TurnDiff, ...] = ()
    if other is not None:
        a, b = replays[0].simulation.turns, replays[1].simulation.turns
        differs = tuple(d for d in (TurnDiff(x.turn, x, y) for x, y in zip(a, b)) if d.differs)
    title = str(log.header.get("title") or (log.path.name if log.path else log.id))
    imported = log.header.get("imported") if isinstance(log.header.get("imported"), dict) else {}
    fmt = imported.get("format") or "native"
    name = log.path.name if log.path else log.id
    return Report(title, f"{name} ({fmt})", chosen, total, _messages(replays[0], chosen), sides[0],
                  sides[1] if len(sides) > 1 else None, differs)
