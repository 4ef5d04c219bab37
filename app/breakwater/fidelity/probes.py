"""Probes: the checkable facts of a session, each with the request that first carried it.

A fact is structured — the task's goal, each user instruction, a file read or modified (by a tool
or by a shell command), a command and its exit status, an error's signature, a decision, a pin —
and carries a matcher over its content: the terms that identify it (paths, identifiers, numbers,
the key words of an instruction), found on token boundaries in one message, close together in one
sentence or line. So a summary that paraphrases a fact keeps it, one that drops it loses it, and a
text that has the words scattered about (or `ls` inside `implementation_details`, or the parts of
an error a sentence apart) does not carry it. The matcher never looks for the extractive
summarizer's own wording.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterator

from breakwater.core.log.error_signature import Signature, error_signatures
from breakwater.core.log.file_effects import MODIFIED, command_head, file_effects, in_place_edit
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.outcome import call_args, command_of, exit_status, reports_errors
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.stages.summarize import (MIN_SENTENCE_CHARS, USER_CONSTRAINT, decision_lines, is_wrapper,
                                              sentences, task_statement, user_instructions, user_text)
from breakwater.fidelity.terms import (CJK_CHAR, FAILURE_MARKERS, KEY_WORDS, NEGATIONS, NEGATIONS_CJK, PREFIX,
                                       WORD_SHARE, at_boundary, key_terms, negated, normalise, path_tail, status_words,
                                       text_parts)
from breakwater.fidelity.text_actions import SWE_OWN, acted_replies, action_effects, editor_updated, text_action

CATEGORIES = ("goal", "files", "commands", "errors", "decisions", "pinned")
# what an agent must never lose (issue 12): the goal and constraints, the files it changed,
# the error it is working on, and what the user pinned
PINNED_KINDS = ("goal", "constraint", "file-modified", "last-error", "pinned")

MAX_ERRORS_PER_RESULT = 3
MAX_DECISIONS_PER_MESSAGE = 3
MAX_INSTRUCTIONS_PER_MESSAGE = 10
NEAR = {"goal": 600, "constraint": 300, "file-read": 0, "file-modified": 80, "command": 300, "error": 300,
        "decision": 300, "pinned": 0}
CORRECTION_WEIGHT = 2       # an instruction with a word of correction or constraint counts twice

# a decision states a choice and why, not the next step narrated ("let's look at ...")
_CHOICE = re.compile(r"(?i)\b(?:decided|decide|will use|instead|because|switch(?:ed)? to|rather than|plan is|chose|"
                     r"choose|going with|the fix is|the fix:|root cause)\b|决定|改用|选择|因为|打算")
# what says a file was changed: past tenses and participles, and the tools that change files (the
# bare verbs are instructions and nouns as often: "change", "fix", "update")
CHANGE_WORDS = ("modified", "modifies", "modifying", "changed", "changing", "edited", "edits", "editing", "wrote",
                "writes", "written", "created", "creates", "updated", "updates", "patched", "fixed", "fixes",
                "replaced",
                "rewrote", "rewritten", "added", "removed", "deleted", "inserted", "sed -i", "str_replace",
                "apply_patch", "tee", "refactored", "renamed", "(m)", "(new)", "(a)")


@dataclass(frozen=True, slots=True)
class Probe:
    id: str
    category: str              # one of CATEGORIES
    kind: str                  # goal, constraint, file-read, file-modified, command, error, decision, pinned
    text: str                  # the fact, for people
    turn: int                  # the first request whose history carries it
    message_id: str            # where it came from (the workbench jumps there)
    parts: tuple[tuple[str, ...], ...]   # normalised terms: each part is found when one of its terms is
    must: int = 0              # the first `must` parts are required ...
    need: int = 0              # ... and `need` of the others
    near: int = 0              # the parts found lie within this many characters (0: anywhere in the message)
    until: int | None = None   # a pin stops being a probe when it is unpinned
    weight: int = 1            # how many facts it counts as (an instruction the user insisted on: 2)
    resolved: int | None = None  # an error: the turn of the first request after the same command succeeded

    def live_at(self, turn: int) -> bool:
        return self.turn <= turn and (self.until is None or turn < self.until)

    def terms(self) -> Iterator[str]:
        for part in self.parts:
            yield from part


def satisfied(probe: Probe, found: dict[int, list[int]], norm: str = "") -> bool:
    """Whether the parts found (part index -> positions in `norm`, a normalised text) carry the
    probe: for a probe with `near`, around one position of its first part, within `near` characters
    and in the same sentence or line (no newline of `norm` between)."""
    must, parts = probe.must, probe.parts
    if any(i not in found for i in range(must)):
        return False
    others = sum(1 for i in range(must, len(parts)) if i in found)
    if others < probe.need:
        return False
    if not probe.near or len(found) < 2:
        return True
    # some position of the first part found has the required parts around it: one bisection a part
    # a position, in each part's positions in order. A common word is found thousands of times in a
    # long tool output, and comparing every position with every other grew with their product (one
    # text with 3,000 and 4,000: 0.62 s)
    ordered = {i: sorted(pos) for i, pos in found.items()}
    for at in ordered[min(found)]:
        lo = max(at - probe.near, norm.rfind("\n", 0, at) + 1)
        end = norm.find("\n", at)
        hi = min(at + probe.near, end if end >= 0 else at + probe.near)
        near = [i for i, pos in ordered.items() if _any_within(pos, lo, hi)]
        if all(i in near for i in range(must)) and sum(1 for i in near if i >= must) >= probe.need:
            return True
    return False


def _any_within(ordered: list[int], lo: int, hi: int) -> bool:
    """Whether a position of `ordered` (ascending) is in [lo, hi]."""
    k = bisect_left(ordered, lo)
    return k < len(ordered) and ordered[k] <= hi


def matches(probe: Probe, norm: str) -> bool:
    """Whether one message's normalised text carries the probe (the slow way: one probe)."""
    found: dict[int, list[int]] = {}
    for i, part in enumerate(probe.parts):
        for term in part:
            prefix = term.endswith(PREFIX)
            term = term.rstrip(PREFIX)
            at = norm.find(term)
            while at >= 0:
                if at_boundary(norm, at, at + len(term), prefix):
                    found.setdefault(i, []).append(at)
                at = norm.find(term, at + 1)
    return satisfied(probe, found, norm)


# -- how a message reads to the matcher ----------------------------------------------------------
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


def lead_of(call: ToolCall | None, result: Message) -> str | None:
    """What a tool result is read after: the command it answers, or the file an in-place edit changed."""
    if call is None:
        return None
    command = command_of(call)
    if command:
        return command
    edited = in_place_edit(call, result.content)
    return f"edited {edited}" if edited else None


def message_text(msg: Message, lead: str | None = None) -> str:
    """Everything of a message that reaches the model, tool-call arguments unescaped, the files a call
    changes named as changed; a tool result after what it answers (`lead_of`) and its exit status."""
    if msg.role == "tool":
        code = exit_status(msg)
        # the command and its status on one line: a fact's parts are found in one (`satisfied`)
        head = " ".join((lead or "").split()) + (f" exit {code}" if code is not None else "")
        return f"{head}\n{msg.content}" if head else msg.content
    if not msg.tool_calls:
        if msg.role == "user":
            edited = editor_updated(msg)
            return f"edited {edited}\n{msg.content}" if edited else msg.content
        # SWE-agent's `create p` names no change: said as one, as for a tool call (a shell command in
        # a reply's code block is left as written: most such blocks show code, they run nothing)
        action = text_action(msg.content) if msg.role == "assistant" else None
        changed = [f"modified {path}" for path, how in action_effects(action) if how == MODIFIED] \
            if action and action.split()[0] in SWE_OWN else ()
        return "\n".join((msg.content, *changed)) if changed else msg.content
    parts = [msg.content]
    for c in msg.tool_calls:
        args = call_args(c)
        parts.append(f"{c.name} " + (" ".join(_flatten(args)) if args else c.arguments))
        parts += [f"modified {path}" for path, how in file_effects(c) if how == MODIFIED]
    return "\n".join(parts)


# -- extraction --------------------------------------------------------------------------------------
class _Collector:
    def __init__(self) -> None:
        self.probes: list[Probe] = []
        self.seen: set[tuple] = set()
        self.errors: list[str] = []   # the error signatures made facts

    def add(self, category: str, kind: str, text: str, turn: int, message_id: str,
            parts: tuple[tuple[str, ...], ...], must: int, need: int, key: tuple | None = None,
            weight: int = 1) -> Probe | None:
        parts = tuple(tuple(t for t in p if t) for p in parts)
        if not parts or not all(parts):
            return None
        key = key or (kind, parts)
        if key in self.seen:
            return None
        self.seen.add(key)
        probe = Probe(f"p{len(self.probes):04d}", category, kind, text, turn, message_id, parts, must, need,
                      NEAR.get(kind, 0), weight=weight)
        self.probes.append(probe)
        return probe


def extract(log: SessionLog) -> list[Probe]:
    """The probes of a session, in the order the session created them."""
    col = _Collector()
    turn = 1                    # the request that will first see the entries fed so far
    goal_seen = False
    said = _Said()
    calls = {c.id: c for m in log.messages for c in m.tool_calls}
    acted = acted_replies(log.messages)   # reply id -> the command its text gives, answered by the next message
    action: str | None = None
    heads_failed: dict[tuple[str, ...], list[int]] = {}   # command head -> error probes it left open
    pins: dict[str, int] = {}                   # message id -> index of its pinned probe
    by_id = {m.id: m for m in log.messages}
    answered = {m.tool_call_id for m in log.messages if m.role == "tool"}
    for entry in log.entries:
        if isinstance(entry, Event):
            _pin_event(entry, turn, col, pins, by_id)
            continue
        msg = entry
        if msg.role == "user":
            if action is not None and msg.is_observation:
                _observation(msg, action, turn, col)
            else:
                goal_seen = _user(msg, turn, goal_seen, col, said)
            action = None
        elif msg.role == "assistant":
            action = acted.get(msg.id)
            _assistant(msg, turn + 1, col, answered, action)
            said.add(msg.content)
            turn += 1
        elif msg.role == "tool":
            call = calls.get(msg.tool_call_id or "")
            _result(msg, call, turn, col, heads_failed)
    source = _sources(log, calls, {p.message_id for p in col.probes})
    return [p for p in col.probes if _carried_by_source(p, source)]


class _Said:
    """The lines and sentences the assistant has said so far, normalised: a user sentence that is one
    of them was pasted. A set, not the text searched: a session's user sentences times its replies'
    text would grow with the square of a long session."""

    def __init__(self) -> None:
        self.lines: set[str] = set()

    def add(self, text: str) -> None:
        if len(text) >= PASTED_CHARS:
            self.lines.update(line for line in normalise(text).split("\n") if len(line) >= PASTED_CHARS)

    def holds(self, sentence: str) -> bool:
        norm = normalise(sentence)
        return len(norm) >= PASTED_CHARS and norm in self.lines


PASTED_CHARS = 24   # a shorter sentence the user may well have written in the same words


def _carried_by_source(probe: Probe, source: dict[str, str]) -> bool:
    """A probe its own message does not carry would be a miss with no compaction at all: dropped."""
    text = source.get(probe.message_id)
    return text is not None and matches(probe, text)


def _user(msg: Message, turn: int, goal_seen: bool, col: _Collector, said: _Said) -> bool:
    """The goal (the format's task statement, else the first user message's first sentence) and every
    instruction of the user's own messages; a framework's observations state none, nor what the
    harness sends on the user's side (a hook's output, a file it attached), nor what the user pasted
    of the assistant's replies."""
    meta = msg.meta or {}
    task = task_statement(msg)
    if meta.get("is_demo") or (task is None and (meta.get("message_type") == "observation" or msg.is_observation)) \
            or is_wrapper(msg.content) or meta.get("attachment") not in (None, "queued_command"):
        return goal_seen
    goal = None
    if not goal_seen and (task is not None or msg.content.strip()):
        goal = next(_sentences(_prose(task if task is not None else user_text(msg.content))), None)
        shaped = text_parts(goal) if goal else None
        if shaped:
            col.add("goal", "goal", goal[:300], turn, msg.id, *shaped)
            goal_seen = True
    found = 0
    if task is not None:
        # the framework's rules around the task statement ("DO NOT MODIFY: Tests"): those that say so
        for s in user_instructions(_prose(msg.content.replace(task, "\n")))[:MAX_INSTRUCTIONS_PER_MESSAGE]:
            shaped = text_parts(s, extra=(NEGATIONS + NEGATIONS_CJK,) if negated(s) else ())
            if shaped:
                col.add("goal", "constraint", s[:300], turn, msg.id, *shaped)
        return goal_seen
    for s in _sentences(_prose(user_text(msg.content))):
        if found >= MAX_INSTRUCTIONS_PER_MESSAGE:
            break
        if s == goal or s.endswith(("?", "？")) or _code_like(s) or said.holds(s):
            continue
        shaped = text_parts(s, extra=(NEGATIONS + NEGATIONS_CJK,) if negated(s) else ())
        if shaped and col.add("goal", "constraint", s[:300], turn, msg.id, *shaped,
                              weight=CORRECTION_WEIGHT if USER_CONSTRAINT.search(s) else 1):
            found += 1
    return goal_seen


_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_CODE_LINE = re.compile(r"^\s*(?:>>>|\.\.\.|\$ |\d+:|[#/]{2}|[{}()\[\]<>]|def |class |import |from \S+ import "
                        r"|return )")


def _prose(text: str) -> str:
    """The text without fenced code and without lines that read as code."""
    text = _FENCE.sub("\n", text)
    return "\n".join(line for line in text.splitlines() if not _CODE_LINE.match(line))


def _code_like(sentence: str) -> bool:
    letters = sum(c.isalpha() or c.isspace() for c in sentence)
    # Chinese writes a sentence without spaces: its characters are its words
    return letters < 0.7 * len(sentence) or (len(sentence.split()) < 3 and not CJK_CHAR.search(sentence))


CJK_SENTENCE_CHARS = 6   # "不要修改迁移文件" says as much as a sentence twice as long in English


def _sentences(text: str) -> Iterator[str]:
    return sentences(text, CJK_SENTENCE_CHARS if CJK_CHAR.search(text) else MIN_SENTENCE_CHARS)


def _assistant(msg: Message, turn: int, col: _Collector, answered: set, action: str | None = None) -> None:
    text = msg.content.strip()
    if text:
        for s in [d for d in decision_lines(text) if _CHOICE.search(d)][:MAX_DECISIONS_PER_MESSAGE]:
            shaped = text_parts(s)
            if shaped:
                col.add("decisions", "decision", s[:300], turn, msg.id, *shaped)
    for call in msg.tool_calls:
        command = command_of(call)
        if command and call.id not in answered:   # no result ever came: the command, with no status
            _command(command, None, turn, msg.id, col)
        _files(file_effects(call), turn, msg.id, col)
    if action is not None:
        # a text action: its status is in the observation's text, which does not name the command
        if action.split()[0] not in SWE_OWN:
            _command(action, None, turn, msg.id, col)
        _files(action_effects(action), turn, msg.id, col)


def _files(effects, turn: int, message_id: str, col: _Collector) -> None:
    for path, how in effects:
        tail = path_tail(path)
        if not tail:
            continue
        if how == MODIFIED:
            col.add("files", "file-modified", f"modified {path}", turn, message_id, ((tail,), CHANGE_WORDS), 2, 0,
                    key=("file-modified", tail))
        elif ("file-modified", tail) not in col.seen:
            col.add("files", "file-read", f"read {path}", turn, message_id, ((tail,),), 1, 0, key=("file-read", tail))


def _observation(msg: Message, action: str, turn: int, col: _Collector) -> None:
    """What the environment answered a text action: the file SWE-agent's editor updated, and the
    errors of a shell command that failed (or whose status the answer does not give)."""
    edited = editor_updated(msg)
    if edited:
        _files(((edited, MODIFIED),), turn, msg.id, col)
    if action.split()[0] in SWE_OWN or exit_status(msg) == 0:
        return
    _errors(msg, turn, col)


def _command(command: str, code: int | None, turn: int, message_id: str, col: _Collector) -> None:
    head = tuple(normalise(t) for t in command_head(command))
    if head:
        parts = tuple((t,) for t in head) + ((status_words(code),) if code is not None else ())
        shown = " ".join(command.split())[:200]
        col.add("commands", "command", f"{shown} → exit {code}" if code is not None else shown, turn, message_id,
                parts, len(parts), 0)


def _result(msg: Message, call, turn: int, col: _Collector, heads_failed: dict) -> None:
    command = command_of(call) if call is not None else None
    code = exit_status(msg)
    if command:
        _command(command, code, turn, msg.id, col)
        if code == 0:
            shown = " ".join(command.split())[:60]
            for i in heads_failed.pop(command_head(command), ()):
                p = col.probes[i]
                col.probes[i] = replace(p, resolved=turn, text=f"{p.text} (resolved: `{shown}` then exited 0)")
    path = in_place_edit(call, msg.content) if call is not None else None
    if path:
        col.add("files", "file-modified", f"modified {path}", turn, msg.id, ((path_tail(path),), CHANGE_WORDS), 2, 0,
                key=("file-modified", path_tail(path)))
    if not reports_errors(msg, call):
        return
    for i in _errors(msg, turn, col):
        if command:
            heads_failed.setdefault(command_head(command), []).append(i)


def _errors(msg: Message, turn: int, col: _Collector) -> list[int]:
    """The error facts of an output that reports errors, each signature once: their indices."""
    out = []
    for sig in error_signatures(msg.content, MAX_ERRORS_PER_RESULT):
        shaped = _signature_parts(sig)
        # an output cut short ends with the start of an error already seen: the same error
        if shaped is None or any(e.startswith(sig.text) for e in col.errors):
            continue
        probe = col.add("errors", "error", sig.text, turn, msg.id, *shaped, key=("error", sig.text))
        if probe is not None:
            col.errors.append(sig.text)
            out.append(len(col.probes) - 1)
    return out


_QUOTED = re.compile(r"'([^'\n]{1,60})'|\"([^\"\n]{1,60})\"")


@lru_cache(maxsize=4096)
def _signature_parts(sig: Signature) -> tuple[tuple[tuple[str, ...], ...], int, int] | None:
    """An error's matcher: its head (exception type, test id, file:line) and what its message names —
    quoted values first (`No module named 'erfa'` is not `... 'numpy'`), then identifiers — are
    required; of its key words, WORD_SHARE."""
    head = normalise(sig.head)
    if sig.kind == "line":
        return text_parts(sig.detail)
    quoted = [normalise(a or b) for a, b in _QUOTED.findall(sig.detail)]
    idents, words = key_terms(sig.detail) if sig.detail else ([], [])
    named = list(dict.fromkeys(q for q in [*quoted, *idents] if q and q != head))[:2]
    words = [w for w in words[:KEY_WORDS] if w.rstrip(PREFIX) not in " ".join(named)]
    required = ((head,),) + tuple((n,) for n in named)
    if sig.kind in ("test", "compiler"):   # an id or a file:line is no failure without a word that says so
        required += (FAILURE_MARKERS,)
    return required + tuple((w,) for w in words), len(required), math.ceil(WORD_SHARE * len(words))


def _pin_event(ev: Event, turn: int, col: _Collector, pins: dict[str, int], by_id: dict[str, Message]) -> None:
    mid = str(ev.get("message_id") or "")
    msg = by_id.get(mid)
    if msg is None:
        return
    if ev.type == "pin" and mid not in pins:
        norm = normalise(message_text(msg))
        if not norm:
            return
        parts = ((norm,),) if len(norm) <= 400 else ((norm[:200].rsplit(" ", 1)[0],), (norm[-200:].split(" ", 1)[-1],))
        if col.add("pinned", "pinned", f"pinned {msg.role} message: {msg.content[:120]}", turn, mid, parts,
                   len(parts), 0, key=("pinned", mid, turn)):
            pins[mid] = len(col.probes) - 1
    elif ev.type == "unpin" and mid in pins:
        i = pins.pop(mid)
        col.probes[i] = replace(col.probes[i], until=turn)


def _sources(log: SessionLog, calls: dict, ids: set[str]) -> dict[str, str]:
    """The normalised text of the messages named in `ids` (those facts came from: a few of thousands)."""
    out = {}
    for m in log.messages:
        if m.id in ids:
            call = calls.get(m.tool_call_id or "") if m.role == "tool" else None
            out[m.id] = normalise(message_text(m, lead_of(call, m)))
    return out
