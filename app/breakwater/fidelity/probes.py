"""Probes: the checkable facts of a session, each with the request that first carried it.

A probe is recoverable from a request when one unit of what is sent (a message, or an
assistant message together with the tool results that answer it) contains all of its
`anchors` and, when `any_of` is set, at least one of those. Anchors are normalised text
(`normalise`), so a fact counts whether it survives verbatim, re-quoted in a summary, or
re-cased; a summary that only alludes to it does not carry it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Iterable, Iterator

from breakwater.core.log.message import Message
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.log.outcome import (CHANGE_TOOLS, PATH_KEYS, call_args, command_of, exit_status, reports_errors,
                                     salient_errors)
from breakwater.core.stages.summarize import sentences, user_instructions

CATEGORIES = ("goal", "files", "commands", "errors", "decisions", "pinned")
# what an agent must never lose (issue 12): the goal and constraints, the files it changed,
# the error it is working on, and what the user pinned
PINNED_KINDS = ("goal", "constraint", "file-modified", "last-error", "pinned")

ANCHOR_CHARS = 80           # a prefix this long identifies a sentence, a command or an error line
MAX_ERRORS_PER_RESULT = 3
MAX_DECISIONS_PER_MESSAGE = 3
RESOLUTION_LOOKAHEAD = 3    # assistant messages after an error where its resolution is looked for

_QUOTES = str.maketrans({c: " " for c in "`*\"'“”‘’\\"})
_DECISION = re.compile(
    r"(?i)\b(?:i'll|i will|we'll|we will|let's|decided|decide|going to|plan is|plan:|instead|because|"
    r"switch(?:ed)? to|will use|chose|choose|rather than)\b|决定|改用|选择|因为|打算|采用|方案")
_RESOLUTION = re.compile(
    r"(?i)\b(?:fix|fixed|fixing|because|cause|caused|the problem|the issue|instead|resolved|root cause)\b|"
    r"修|原因|因为|导致|问题|解决")


def normalise(text: str) -> str:
    """Case, width, quoting and whitespace do not change a fact."""
    text = unicodedata.normalize("NFKC", text).casefold()
    # summaries quote tool calls as JSON, where newlines and quotes come escaped
    text = text.replace("\\n", " ").replace("\\t", " ").translate(_QUOTES)
    return " ".join(text.split())


def clip(norm: str, limit: int = ANCHOR_CHARS) -> str:
    """A prefix of normalised text, cut at a word boundary when there is one, without the closing
    punctuation a summary may not repeat."""
    if len(norm) > limit:
        cut = norm.rfind(" ", limit // 2, limit)
        norm = norm[: cut if cut > 0 else limit]
    return norm.rstrip(".,;:!?。，；：！？…、 ")


@dataclass(frozen=True, slots=True)
class Probe:
    id: str
    category: str              # one of CATEGORIES
    kind: str                  # goal, constraint, file-read, file-modified, command, error, resolution, decision, pinned
    text: str                  # the fact, for people
    turn: int                  # the first request whose history carries it
    message_id: str            # where it came from (the workbench jumps there)
    anchors: tuple[str, ...]
    any_of: tuple[str, ...] = ()
    until: int | None = None   # a pin stops being a probe when it is unpinned

    def live_at(self, turn: int) -> bool:
        return self.turn <= turn and (self.until is None or turn < self.until)


def matches(probe: Probe, text: str) -> bool:
    """Whether one unit's normalised text carries the probe."""
    return all(a in text for a in probe.anchors) and (not probe.any_of or any(a in text for a in probe.any_of))


def _flatten(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _flatten(v)
    elif isinstance(value, list):
        for v in value:
            yield from _flatten(v)
    elif value is not None:
        yield str(value)


def message_text(msg: Message) -> str:
    """Everything of a message that reaches the model, tool-call arguments unescaped."""
    if not msg.tool_calls:
        return msg.content
    parts = [msg.content]
    for c in msg.tool_calls:
        args = call_args(c)
        parts.append(f"{c.name} " + (" ".join(_flatten(args)) if args else c.arguments))
    return "\n".join(parts)


def units(messages: Iterable[Message]) -> Iterator[list[Message]]:
    """An assistant message with tool calls and the results that follow it form one unit."""
    current: list[Message] = []
    for m in messages:
        if m.role == "tool" and current and current[0].tool_calls:
            current.append(m)
            continue
        if current:
            yield current
        current = [m]
    if current:
        yield current


def status_markers(code: int) -> tuple[str, ...]:
    return (f"exit code: {code}", f"exit code {code}", f"exit status {code}", f"exit status: {code}",
            f"exited with {code}", f"exit {code}")


def change_markers(path: str) -> tuple[str, ...]:
    p = normalise(path)
    verbs = ("created", "replaced", "modified", "changed", "wrote", "edited", "updated", "patched")
    return tuple(dict.fromkeys([*(f"{normalise(t)} {p}" for t in CHANGE_TOOLS), *(f"{v} {p}" for v in verbs),
                                f"{p} (changed)", f"{p} (modified)", f"{p}: modified", f"{p}: changed"]))


class _Collector:
    def __init__(self) -> None:
        self.probes: list[Probe] = []
        self.seen: set[tuple] = set()

    def add(self, category: str, kind: str, text: str, turn: int, message_id: str,
            anchors: tuple[str, ...], any_of: tuple[str, ...] = (), key: tuple | None = None) -> Probe | None:
        anchors = tuple(a for a in anchors if a)
        key = key or (kind, anchors, any_of)
        if not anchors or key in self.seen:
            return None
        self.seen.add(key)
        probe = Probe(f"p{len(self.probes):04d}", category, kind, text, turn, message_id, anchors, any_of)
        self.probes.append(probe)
        return probe


def extract(log: SessionLog) -> list[Probe]:
    """The probes of a session, in the order the session created them."""
    col = _Collector()
    turn = 1                    # the request that will first see the entries fed so far
    first_user = True
    results: dict[str, Message] = {m.tool_call_id: m for m in log.messages if m.role == "tool" and m.tool_call_id}
    open_errors: list[tuple[Probe, int]] = []   # error probes still looking for a resolution
    pins: dict[str, int] = {}                   # message id -> index of its pinned probe
    by_id = {m.id: m for m in log.messages}
    calls = {c.id: c for m in log.messages for c in m.tool_calls}
    for entry in log.entries:
        if isinstance(entry, Event):
            _pin_event(entry, turn, col, pins, by_id)
            continue
        msg = entry
        if msg.role == "user":
            _user(msg, turn, first_user, col)
            first_user = False
        elif msg.role == "assistant":
            _assistant(msg, turn + 1, col, results, open_errors)
            turn += 1
        elif msg.role == "tool" and reports_errors(msg, calls.get(msg.tool_call_id or "")):
            for line in salient_errors(msg.content, MAX_ERRORS_PER_RESULT):
                anchor = clip(normalise(line))
                probe = col.add("errors", "error", line.strip()[:200], turn, msg.id, (anchor,)) if len(anchor) >= 8 else None
                if probe:
                    open_errors.append((probe, RESOLUTION_LOOKAHEAD))
    source = _source_units(log)
    return [p for p in col.probes if matches(p, source.get(p.message_id, ""))]


def _user(msg: Message, turn: int, first: bool, col: _Collector) -> None:
    goal = next(sentences(msg.content), None) if first else None
    if goal:
        col.add("goal", "goal", goal[:300], turn, msg.id, (clip(normalise(goal)),))
    for s in user_instructions(msg.content):
        if s != goal:
            col.add("goal", "constraint", s[:300], turn, msg.id, (clip(normalise(s)),))


def _assistant(msg: Message, turn: int, col: _Collector, results: dict[str, Message],
               open_errors: list[tuple[Probe, int]]) -> None:
    text = msg.content.strip()
    if text:
        decided = 0
        for s in sentences(text):
            if decided < MAX_DECISIONS_PER_MESSAGE and _DECISION.search(s):
                col.add("decisions", "decision", s[:300], turn, msg.id, (clip(normalise(s)),))
                decided += 1
        still = []
        for probe, left in open_errors:
            fix = next((s for s in sentences(text) if _RESOLUTION.search(s)), None)
            if fix:
                col.add("errors", "resolution", f"{fix[:200]} (after: {probe.text[:80]})", turn, msg.id,
                        (clip(normalise(fix)),), key=("resolution", msg.id, fix))
            elif left > 1:
                still.append((probe, left - 1))
        open_errors[:] = still
    for call in msg.tool_calls:
        args = call_args(call)
        path = next((args[k] for k in PATH_KEYS if isinstance(args.get(k), str) and args[k].strip()), None)
        if path and call.name in CHANGE_TOOLS:
            col.add("files", "file-modified", f"modified {path}", turn, msg.id, (normalise(path),),
                    change_markers(path), key=("file-modified", path))
        elif path:
            col.add("files", "file-read", f"read {path}", turn, msg.id, (normalise(path),), key=("file-read", path))
        cmd = command_of(call)
        if cmd:
            result = results.get(call.id)
            code = exit_status(result) if result else None
            shown = " ".join(cmd.split())[:200]
            col.add("commands", "command", f"{shown} → exit {code}" if code is not None else shown, turn, msg.id,
                    (clip(normalise(cmd)),), status_markers(code) if code is not None else ())


def _pin_event(ev: Event, turn: int, col: _Collector, pins: dict[str, int], by_id: dict[str, Message]) -> None:
    mid = str(ev.get("message_id") or "")
    msg = by_id.get(mid)
    if msg is None:
        return
    if ev.type == "pin" and mid not in pins:
        norm = normalise(message_text(msg))
        anchors = (norm,) if len(norm) <= 400 else (norm[:200], norm[-200:])
        col.add("pinned", "pinned", f"pinned {msg.role} message: {msg.content[:120]}", turn, mid, anchors,
                key=("pinned", mid, turn))
        pins[mid] = len(col.probes) - 1
    elif ev.type == "unpin" and mid in pins:
        i = pins.pop(mid)
        p = col.probes[i]
        col.probes[i] = Probe(p.id, p.category, p.kind, p.text, p.turn, p.message_id, p.anchors, p.any_of, turn)


def _source_units(log: SessionLog) -> dict[str, str]:
    """Each message's own unit, normalised: a probe its source does not match would be a miss with
    no compaction at all, so such a probe is dropped."""
    out = {}
    for unit in units(log.messages):
        text = normalise("\n".join(message_text(m) for m in unit))
        for m in unit:
            out[m.id] = text
    return out
