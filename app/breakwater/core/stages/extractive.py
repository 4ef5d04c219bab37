"""The offline summary of deep compaction: no model, deterministic, in the sections an agent needs to
continue (pi's and Claude Code's): the goal, every user instruction verbatim while it fits, progress
(what was done, what is in progress), decisions, the next step as the assistant last put it, the
critical context (the current error and whether it is resolved, the latest request), the errors with
their status, and the files modified (by any means) before the files read.

A later compaction starts from the previous summary: each section is read back and carried on, and
the counts of what was left out add up.
"""

from __future__ import annotations

import re
from typing import Sequence

from breakwater.core.log.error_signature import error_signatures
from breakwater.core.log.file_effects import MODIFIED, command_head, file_effects, in_place_edit
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.outcome import command_of, exit_status, reports_errors
from breakwater.core.policy import Policy
from breakwater.core.stages.summarize import (MIN_SENTENCE_CHARS, SECTIONS, SUMMARY_HEADER, SummaryResult, decision_lines,
                                       is_wrapper, pretruncate, sentences, task_statement, user_instructions,
                                              user_text)

GOAL_CHARS = 600
INSTRUCTION_CHARS = 400   # one instruction, under a fixed cap (the seeds'); with a share of the window: user_keep_chars
LATEST_REQUEST_CHARS = 400
NEXT_CHARS = 500
COMMAND_CHARS = 200
MAX_DECISIONS = 8
MAX_ERRORS = 8
MAX_RESOLVED = 3      # of the errors resolved, the most recent; every open one is kept
OTHERS = 1_500        # chars the user's instructions leave to the errors, decisions, commands and files read
READ_RESERVE = 300
MAX_READ_PATHS = 40   # every modified path is kept; read ones up to this many, the most recent
_INSTRUCTION = "User: "
_LATEST = "Latest request: "
_RAN = "Ran: "
_DOING = "In progress: "
_NEXT = "Next: "
_CURRENT = "Current error: "
_MORE_INSTRUCTIONS = re.compile(r"^\((\d+) earlier user instructions? left out\)$")
_MORE_COMMANDS = re.compile(r"^\((\d+) earlier commands? run, not listed\)$")
_MORE_PATHS = re.compile(r"^\((\d+) more files? read, not listed\)$")
_ERROR_LINE = re.compile(r"^(.*) — (open|resolved)(?: \(from `(.*)`\))?$")
_PLAN = re.compile(r"(?i)\b(?:next|then|will|i'll|we'll|let me|let's|plan|todo|remaining|going to|need to)\b"
                   r"|接下来|然后|计划")
_SECTION_LINE = re.compile(r"^- (.*)$")


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _parse_previous(previous: str | None) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {s: [] for s in SECTIONS}
    current = None
    for line in (previous or "").splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            continue
        m = _SECTION_LINE.match(line)
        if current in sections and m and m.group(1) != "(none)":
            sections[current].append(m.group(1))
    return sections


class _Error:
    __slots__ = ("text", "status", "command")

    def __init__(self, text: str, status: str, command: str) -> None:
        self.text, self.status, self.command = text, status, command

    def line(self) -> str:
        return f"{self.text} — {self.status}" + (f" (from `{_clip(self.command, 60)}`)" if self.command else "")


class ExtractiveSummarizer:
    """No model: fills the sections from the messages. Deterministic."""

    name = "extractive"

    def summarize(self, messages: Sequence[Message], previous: str | None, policy: Policy) -> SummaryResult:
        prev = _parse_previous(previous)
        # with the instructions' own share, each keeps what shaping keeps of a user message: a pasted
        # stack trace or a list of colours (pi) is the instruction, not its first 400 chars
        s = _State(prev, policy.user_keep_chars if policy.summary_instruction_share else INSTRUCTION_CHARS)
        s.read(messages, policy)
        body = s.render(policy.summary_max_chars, policy.summary_instruction_chars)
        return SummaryResult(body, True, self.name)


class _State:
    def __init__(self, prev: dict[str, list[str]], instruction_chars: int = INSTRUCTION_CHARS) -> None:
        self.instruction_chars = instruction_chars
        self.goal = prev["Goal"][0] if prev["Goal"] else None
        self.said, self.said_left_out = [], 0
        for line in prev["Constraints"]:
            more = _MORE_INSTRUCTIONS.match(line)
            if more:
                self.said_left_out += int(more.group(1))
            else:
                self.said.append(line)
        self.ran, self.ran_left_out, self.doing = [], 0, None
        for line in prev["Progress"]:
            more = _MORE_COMMANDS.match(line)
            if more:
                self.ran_left_out += int(more.group(1))
            elif line.startswith(_RAN):
                self.ran.append(line)
            elif line.startswith(_DOING):
                self.doing = line
        self.decisions = list(prev["Decisions"])
        self.next = prev["Next steps"][0] if prev["Next steps"] else None
        self.latest = next((line for line in prev["Critical context"] if line.startswith(_LATEST)), None)
        self.errors: list[_Error] = []
        for line in prev["Errors"]:
            m = _ERROR_LINE.match(line)
            self.errors.append(_Error(m.group(1), m.group(2), m.group(3) or "") if m else _Error(line, "open", ""))
        self.modified = [p.removesuffix(" (modified)") for p in prev["Files modified"] if p != "…"]
        self.read_paths, self.read_left_out = [], 0
        for line in prev["Files read"]:
            more = _MORE_PATHS.match(line)
            if more:
                self.read_left_out += int(more.group(1))
            else:
                self.read_paths.append(line)

    # -- reading the messages ----------------------------------------------------------------------
    def read(self, messages: Sequence[Message], policy: Policy) -> None:
        calls = {c.id: c for m in messages if m.tool_calls for c in m.tool_calls}
        last_text, last_call = "", None
        for m in messages:
            if m.role == "user":
                self._user(m)
            elif m.role == "assistant":
                if m.content.strip():
                    last_text = m.content
                    if len(m.content) >= MIN_SENTENCE_CHARS:
                        # a sentence that only announces what follows ("The fix should be:") decides nothing
                        self.decisions += [d for d in decision_lines(pretruncate(m.content, policy))
                                           if not d.endswith(":")]
                for c in m.tool_calls:
                    last_call = c
                    for path, how in file_effects(c):
                        self._file(path, how)
            elif m.role == "tool":
                self._result(m, calls.get(m.tool_call_id or ""))
        if last_text:
            # the last reply, quoted: whole when short, else the sentences that plan what comes next
            plan = [x for x in sentences(last_text) if _PLAN.search(x)] if len(last_text) > NEXT_CHARS else []
            self.next = _NEXT + '"' + _clip(" ".join(plan) or last_text, NEXT_CHARS) + '"'
        if last_call is not None:
            self.doing = _DOING + _clip(f"{last_call.name} {command_of(last_call) or last_call.arguments}", 200)

    def _user(self, m: Message) -> None:
        meta = m.meta or {}
        if m.content.startswith(SUMMARY_HEADER) or meta.get("is_demo") or is_wrapper(m.content):
            return
        task = task_statement(m)
        if task is None and (meta.get("message_type") == "observation" or m.is_observation):
            return
        text = user_text(m.content)
        if self.goal is None:
            self.goal = _clip(task if task is not None else text, GOAL_CHARS)
            if task is not None:   # the framework's rules around the task statement, as it states them
                self.said += [_INSTRUCTION + _clip(x, self.instruction_chars)
                              for x in user_instructions(m.content.replace(task, "\n"))]
            return
        if task is not None or len(text) < MIN_SENTENCE_CHARS:
            return
        line = _INSTRUCTION + _clip(text, self.instruction_chars)
        if line not in self.said:
            self.said.append(line)
        self.latest = _LATEST + _clip(text, LATEST_REQUEST_CHARS)

    def _file(self, path: str, how: str) -> None:
        if how == MODIFIED:
            if path not in self.modified:
                self.modified.append(path)
            if path in self.read_paths:
                self.read_paths.remove(path)
        elif path not in self.modified:
            if path in self.read_paths:
                self.read_paths.remove(path)
            self.read_paths.append(path)

    def _result(self, m: Message, call: ToolCall | None) -> None:
        if call is not None and (edited := in_place_edit(call, m.content)):
            self._file(edited, MODIFIED)
        command = command_of(call) if call is not None else None
        code = exit_status(m)
        if command:
            self.ran.append(_RAN + _clip(command, COMMAND_CHARS) + (f" → exit {code}" if code is not None else ""))
            if code == 0:
                head = command_head(command)
                for e in self.errors:
                    if e.status == "open" and e.command and command_head(e.command) == head:
                        e.status = "resolved"
        if reports_errors(m, call):
            for sig in error_signatures(m.content):
                known = next((e for e in self.errors if e.text == sig.text), None)
                if known is not None:
                    self.errors.remove(known)
                self.errors.append(_Error(sig.text, "open", command or ""))

    # -- writing the summary -----------------------------------------------------------------------
    def render(self, limit: int, instruction_chars: int = 0) -> str:
        """The sections within `limit` + `instruction_chars` chars, filled in order of what an agent can
        least do without: the goal, the next step, the current error, the files modified; then the
        user's instructions (the most recent first, leaving OTHERS chars, and `instruction_chars` more
        that only they may use); then the errors (the open ones, a few resolved), the decisions, the
        commands run and the files read, each the most recent that fit."""
        current = self.errors[-1] if self.errors else None
        latest = [self.latest] if self.latest and (_INSTRUCTION + self.latest[len(_LATEST):]) not in self.said else []
        doing = [self.doing] if self.doing else []
        sections = {
            "Goal": [self.goal] if self.goal else [],
            "Next steps": [self.next] if self.next else [],
            "Critical context": ([f"{_CURRENT}{current.text} ({current.status})"] if current else []) + latest,
            "Files modified": [f"{p} (modified)" for p in self.modified],
            "Progress": doing,
        }
        room = limit - len(render_sections(sections))
        share = max(room - OTHERS, room // 2)
        sections["Constraints"] = said = within(self.said, share + instruction_chars, self.said_left_out,
                                                "earlier user instruction{s} left out")
        # the rest get what they would without the instructions' own chars: the summary grows only by
        # instructions the fixed cap would have left out
        room -= min(_size(said), share)
        open_ = [e for e in self.errors if e.status == "open" or e is current]
        resolved = [e for e in self.errors if e not in open_][-MAX_RESOLVED:]
        errors = [e.line() for e in self.errors if e in open_ or e in resolved][-MAX_ERRORS:]
        sections["Errors"] = errors = within(errors, room // 2, 0, "")
        room -= _size(errors)
        sections["Decisions"] = decisions = within(_dedupe(self.decisions)[-MAX_DECISIONS:], room // 2, 0, "")
        room -= _size(decisions)
        ran = within(self.ran, max(room - READ_RESERVE, 0), self.ran_left_out, "earlier command{s} run, not listed")
        sections["Progress"] = ran + doing
        room -= _size(ran)
        sections["Files read"] = within(self.read_paths[-MAX_READ_PATHS:], max(room, 0),
                                        self.read_left_out + max(0, len(self.read_paths) - MAX_READ_PATHS),
                                        "more file{s} read, not listed", note_first=False)
        body = render_sections(sections)
        limit += instruction_chars
        if len(body) > limit:   # a goal and files modified past the cap on their own: cut at a line
            body = body[: limit].rsplit("\n", 1)[0]
        return body


def _size(lines: list[str]) -> int:
    return sum(len(line) + 3 for line in lines)


def within(lines: list[str], budget: int, left_out: int, note: str, note_first: bool = True) -> list[str]:
    """The most recent `lines` that fit in `budget` chars, in order, and a line saying how many were
    left out (`note` with `{s}` for the plural; none when `note` is empty), counting `left_out` from before."""
    kept, used = [], 0
    for line in reversed(lines):
        used += len(line) + 3
        if used > budget:
            break
        kept.append(line)
    left_out += len(lines) - len(kept)
    more = [f"({left_out} {note.format(s='s' if left_out != 1 else '')})"] if left_out and note else []
    return (more + kept[::-1]) if note_first else (kept[::-1] + more)


def _dedupe(items: list[str]) -> list[str]:
    seen, out = set(), []
    for it in items:
        key = it.lower()
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out


def render_sections(sections: dict[str, list[str]]) -> str:
    lines = []
    for name in SECTIONS:
        lines.append(f"## {name}")
        lines.extend(f"- {it}" for it in (sections.get(name) or ["(none)"]))
    return "\n".join(lines)
