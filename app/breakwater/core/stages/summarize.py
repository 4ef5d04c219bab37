"""Summaries for deep compaction (SPEC §5; seed 000 §8.3.3, seed 003 §2).

A summarizer turns the messages before a safe cut (plus the previous summary,
if any) into text with five parts: the original goal, key decisions and why,
files read or changed, current progress and next steps, errors and how they
were resolved. The LLM summarizer (agent layer) uses `summary_request` and
`validate_summary`; the offline default is `ExtractiveSummarizer`.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, Protocol, Sequence

from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.outcome import (CHANGE_TOOLS, PATH_KEYS, call_args, command_of, exit_status, reports_errors,
                                     salient_errors)
from breakwater.core.policy import Policy

SUMMARY_HEADER = "[Summary of prior conversation]"

SECTIONS = ("Original goal", "Key decisions", "Files read or changed", "Progress and next steps",
            "Errors and resolutions")

SUMMARY_SYSTEM_PROMPT = """You are a context compaction engine. You will read the transcript of an agent \
session and write the summary that replaces it in the agent's context. Preserve:
1. The original user request and goal.
2. Key decisions made and their rationale, including every correction or preference the user gave.
3. Files that were read or modified (with paths).
4. Current progress status and next steps.
5. Any errors encountered and how they were resolved.

Work in two phases.
Phase 1 - write a chronological analysis inside <analysis></analysis> tags: walk the timeline; note each \
user correction, decision and preference change; track files read, changed or created; record errors, \
blockers and their fixes.
Phase 2 - write the final summary inside <summary></summary> tags, using exactly these headings:
## Original goal
## Key decisions
## Files read or changed
## Progress and next steps
## Errors and resolutions
Prefer the user's decisions and corrections; include the current task state and the next step. \
Be concise but keep every actionable detail (paths, commands, identifiers, error messages). \
Only the <summary> block is kept."""


@dataclass(frozen=True, slots=True)
class SummaryResult:
    text: str          # the summary body (without the header); "" when rejected
    ok: bool
    summarizer: str
    reason: str = ""   # why it was rejected, or a note


class Summarizer(Protocol):
    name: str

    def summarize(self, messages: Sequence[Message], previous: str | None, policy: Policy) -> SummaryResult: ...


def pretruncate(content: str, policy: Policy) -> str:
    """seed 000 truncateForCompaction: over 2,000 chars -> first 1,000 + marker + last 800."""
    if len(content) <= policy.summary_pretruncate_chars:
        return content
    return (content[: policy.summary_pretruncate_head] + "\n...[truncated]...\n"
            + content[-policy.summary_pretruncate_tail:])


def transcript(messages: Sequence[Message], previous: str | None, policy: Policy) -> str:
    parts = []
    if previous:
        parts.append(f"[earlier summary]: {previous}\n---")
    for m in messages:
        if m.role == "system":
            continue
        text = pretruncate(m.content, policy)
        for c in m.tool_calls:
            text += f"\n<tool_call {c.name}>{pretruncate(c.arguments, policy)}</tool_call>"
        parts.append(f"[{m.role}]: {text}\n---")
    return "\n".join(parts)


def summary_request(messages: Sequence[Message], previous: str | None, policy: Policy) -> list[dict]:
    return [{"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
            {"role": "user", "content": transcript(messages, previous, policy)}]


_SUMMARY_TAG = re.compile(r"<summary>(.*?)</summary>", re.DOTALL | re.IGNORECASE)


def validate_summary(output: str | None, policy: Policy, summarizer: str = "llm") -> SummaryResult:
    """Keep only a well-formed <summary>; anything doubtful becomes an empty, rejected result."""
    if not output or not output.strip():
        return SummaryResult("", False, summarizer, "empty output")
    found = _SUMMARY_TAG.findall(output)
    if not found:
        return SummaryResult("", False, summarizer, "missing <summary> tags")
    body = found[-1].strip()
    if not body:
        return SummaryResult("", False, summarizer, "empty <summary>")
    if len(body) > policy.summary_max_chars:
        return SummaryResult("", False, summarizer, f"summary over {policy.summary_max_chars} chars ({len(body)})")
    problem = garbled(body)
    if problem:
        return SummaryResult("", False, summarizer, f"garbled summary: {problem}")
    return SummaryResult(body, True, summarizer)


def garbled(text: str) -> str | None:
    if "<analysis>" in text or "</analysis>" in text or "<summary>" in text:
        return "nested tags"
    letters = sum(1 for ch in text if ch.isalpha())
    if letters < max(20, len(text) // 10):
        return "too few letters"
    bad = sum(1 for ch in text if ch == "\ufffd" or (unicodedata.category(ch) == "Cc" and ch not in "\n\t\r"))
    if bad > len(text) // 50:
        return "control or replacement characters"
    words = text.split()
    if len(words) >= 40:
        top = max(words.count(w) for w in set(words[:200]))
        if top > len(words) * 0.3:
            return "one word repeated over and over"
    return None


# -- the offline extractive summarizer -----------------------------------------------------------
_PATH = re.compile(r"(?<![\w/.-])((?:\.{0,2}/)?(?:[\w@.-]+/)*[\w@-][\w.@-]*\.[A-Za-z][\w]{0,9})(?![\w/])")
# the words of a decision (as whole words, in any case) and their Chinese counterparts
DECISION_WORDS = ("decided", "decide", "will use", "instead", "because", "switched to", "switch to", "let's",
                  "plan is", "i'll", "we'll", "should")
DECISION_CJK = ("决定", "改用", "选择", "因为", "打算")


def _words_pattern(words: tuple[str, ...], cjk: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"(?i)\b(?:" + "|".join(map(re.escape, words)) + r")\b|" + "|".join(cjk))


_DECISION = _words_pattern(DECISION_WORDS, DECISION_CJK)
_SECTION_LINE = re.compile(r"^- (.*)$")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;])\s+|(?<=[。！？；])|\n+")
_BULLET = re.compile(r"^(?:[-*•>#]+|\d+[.)])\s+")
MIN_SENTENCE_CHARS = 12
# what a user says to keep doing, stop doing or never do: corrections, limits, preferences
CONSTRAINT_WORDS = ("don't", "do not", "never", "must", "always", "keep", "only", "avoid", "without", "make sure",
                    "instead", "rather than", "no longer", "stop", "shouldn't", "should not", "not allowed", "prefer",
                    "leave")
CONSTRAINT_CJK = ("不要", "别", "必须", "只能", "不能", "保持", "避免", "而不是", "改成", "改用", "不许", "禁止", "务必",
                  "符合", "规范", "注意", "保留")
USER_CONSTRAINT = _words_pattern(CONSTRAINT_WORDS, CONSTRAINT_CJK)
# the characters outside ASCII that (?i) takes for an ASCII letter: İ and ı for i, ſ for s, the Kelvin sign for k
_CASE_ALIKE = "\u0130\u0131\u017f\u212a"

MAX_ITEMS = {"Key decisions": 8, "Errors and resolutions": 10}
MAX_READ_PATHS = 40  # every changed path is kept; read ones up to this many, the most recent
GOAL_CHARS = 600
INSTRUCTION_CHARS = 300
LATEST_REQUEST_CHARS = 400
INSTRUCTIONS_BUDGET = 2_400  # of `summary_max_chars`: the user's instructions, the most recent first
_INSTRUCTION = "User: "
_LATEST = "Latest request: "
_MORE_INSTRUCTIONS = re.compile(r"^\((\d+) earlier user instructions? left out\)$")
COMMAND_CHARS = 200
COMMANDS_BUDGET = 1_500      # the commands run, the most recent first, with their exit status
_RAN = "Ran: "
_MORE_COMMANDS = re.compile(r"^\((\d+) earlier commands? run, not listed\)$")
_MORE_PATHS = re.compile(r"^\((\d+) more files? read, not listed\)$")


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def sentences(text: str) -> Iterator[str]:
    """Sentences and list items, without their bullets; fragments too short to state anything are skipped."""
    if len(text) < MIN_SENTENCE_CHARS:   # no part of it can be long enough (a chat of short replies)
        return
    for raw in _SENTENCE_END.split(text):
        found = _BULLET.sub("", raw.strip())
        if len(found) >= MIN_SENTENCE_CHARS:
            yield found


def may_say(text: str, words: tuple[str, ...], cjk: tuple[str, ...]) -> bool:
    """False when `_words_pattern(words, cjk)` cannot find anything in `text`: none of the words is in
    it lowered, and none of the Chinese ones, and no character (?i) would take for an ASCII letter
    (a handful of substring searches, where the pattern tries its words at every character)."""
    if not text.isascii() and (any(c in text for c in cjk) or any(c in text for c in _CASE_ALIKE)):
        return True
    low = text.lower()
    return any(w in low for w in words)


# a sentence is a piece of its text, so a text `may_say` nothing of has no sentence to find: most of
# the replies and messages a summary covers are not split at all
@lru_cache(maxsize=1 << 14)   # a compaction redone further, every simulation of a session: the same replies
def decision_lines(text: str) -> tuple[str, ...]:
    """The sentences of an assistant reply that state a decision, each cut to a readable length."""
    if not may_say(text, DECISION_WORDS, DECISION_CJK):
        return ()
    return tuple(_clip(s, 220) for s in sentences(text)
                 if may_say(s, DECISION_WORDS, DECISION_CJK) and _DECISION.search(s))


def user_instructions(text: str) -> list[str]:
    """The sentences of a user message that correct, constrain or state a preference (not questions)."""
    if not may_say(text, CONSTRAINT_WORDS, CONSTRAINT_CJK):
        return []
    return [s for s in sentences(text) if may_say(s, CONSTRAINT_WORDS, CONSTRAINT_CJK) and USER_CONSTRAINT.search(s)
            and not s.endswith(("?", "？"))]


def _parse_previous(previous: str | None) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {s: [] for s in SECTIONS}
    if not previous:
        return sections
    current = None
    for line in previous.splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            continue
        m = _SECTION_LINE.match(line)
        if current in sections and m and m.group(1) != "(none)":
            sections[current].append(m.group(1))
    return sections


def _call_paths(call: ToolCall, command: str | None) -> list[tuple[str, str]]:
    """(path, how) of each file a call names: in its arguments, or in `command`, the one it runs."""
    args = call_args(call)
    verb = "changed" if call.name in CHANGE_TOOLS else "read"
    out = [(args[key], verb) for key in PATH_KEYS if isinstance(args.get(key), str)]
    if command:
        out += [(p, "used") for p in _PATH.findall(command)]
    return out


class ExtractiveSummarizer:
    """No model: fills the five sections from the messages. Deterministic."""

    name = "extractive"

    def summarize(self, messages: Sequence[Message], previous: str | None, policy: Policy) -> SummaryResult:
        prev = _parse_previous(previous)
        decisions = prev["Key decisions"][:]
        files: dict[str, str] = {}
        left_out = 0
        for line in prev["Files read or changed"]:
            more = _MORE_PATHS.match(line)
            if more:
                left_out += int(more.group(1))
                continue
            path, _, verb = line.partition(" (")
            files[path] = verb.rstrip(")") or "read"
        errors = prev["Errors and resolutions"][:]
        called: list[ToolCall] = []
        users = [m for m in messages if m.role == "user" and not m.content.startswith(SUMMARY_HEADER)]
        goal = goal_lines(prev["Original goal"], users)
        calls = {c.id: c for m in messages if m.tool_calls for c in m.tool_calls}
        results = {m.tool_call_id: m for m in messages if m.role == "tool" and m.tool_call_id}
        ran, not_listed = [], 0
        for line in prev["Progress and next steps"]:
            more = _MORE_COMMANDS.match(line)
            if more:
                not_listed += int(more.group(1))
            elif line.startswith(_RAN):
                ran.append(line)
        last_text = ""
        for m in messages:
            if m.role == "assistant":
                text = m.content
                if text.strip():
                    last_text = text
                    # a shorter reply holds no sentence (a chat of short replies: most of them)
                    if len(text) >= MIN_SENTENCE_CHARS:
                        decisions += decision_lines(pretruncate(text, policy))
                for c in m.tool_calls:
                    command = command_of(c)
                    for path, verb in _call_paths(c, command):
                        if files.get(path) != "changed":
                            files[path] = verb
                    called.append(c)
                    if command:
                        ran.append(ran_line(c, results.get(c.id), command))
            elif m.role == "tool" and reports_errors(m, calls.get(m.tool_call_id or "")):
                # the errors of what failed, as the agent saw them; not every line of a file that says "error"
                errors += [_clip(line, 200) for line in salient_errors(m.content)]

        actions = [_clip(f"{c.name} {c.arguments}", 160) for c in called[-3:]]   # the last few are shown

        def progress(commands_budget: int) -> list[str]:
            out = ["Last status: " + _clip(last_text, 400)] if last_text else []
            out += within(ran, commands_budget, not_listed, "earlier command{s} run, not listed")
            if actions:
                out.append("Last actions: " + "; ".join(actions))
            return out + ["Next: continue from the last status above."]

        sections = {
            "Original goal": goal,
            "Key decisions": _dedupe(decisions)[-MAX_ITEMS["Key decisions"]:],
            "Files read or changed": file_lines(files, left_out),
            "Progress and next steps": progress(COMMANDS_BUDGET),
            "Errors and resolutions": _dedupe(errors)[-MAX_ITEMS["Errors and resolutions"]:],
        }
        body = render_sections(sections)
        # over the cap, the older commands give way first, then the older read paths
        shrink = [("Progress and next steps", progress(COMMANDS_BUDGET * k // 4)) for k in (2, 0)]
        shrink += [("Files read or changed", file_lines(files, left_out, budget))
                   for budget in (MAX_READ_PATHS // 2, MAX_READ_PATHS // 8, 0)]
        for name, lines in shrink:
            if len(body) <= policy.summary_max_chars:
                break
            sections[name] = lines
            body = render_sections(sections)
        if len(body) > policy.summary_max_chars:
            body = body[: policy.summary_max_chars - 20].rsplit("\n", 1)[0] + "\n- …"
        return SummaryResult(body, True, self.name)


def goal_lines(previous: list[str], users: Sequence[Message]) -> list[str]:
    """The goal, every correction or constraint the user gave since (the most recent ones within
    `INSTRUCTIONS_BUDGET`, saying how many were left out), and the user's latest request."""
    goal, latest, said, left_out, last = None, None, [], 0, None
    for line in previous:
        more = _MORE_INSTRUCTIONS.match(line)
        if more:
            left_out += int(more.group(1))
        elif line.startswith(_LATEST):
            latest = line
        elif goal is None:
            goal = line
        else:
            said.append(line)
    for i, u in enumerate(users):
        if goal is None and i == 0:
            goal = _clip(u.content, GOAL_CHARS)
            said += [_INSTRUCTION + _clip(s, INSTRUCTION_CHARS) for s in user_instructions(u.content)
                     if " ".join(s.split()) not in goal]
            continue
        if len(u.content) >= MIN_SENTENCE_CHARS:   # a shorter message holds no sentence
            said += [_INSTRUCTION + _clip(s, INSTRUCTION_CHARS) for s in user_instructions(u.content)]
        last = u
    if last is not None:   # the latest request is the last user's: clipped once, not once per user
        latest = _LATEST + _clip(last.content, LATEST_REQUEST_CHARS)
    lines = ([goal] if goal else []) + within(_dedupe(said), INSTRUCTIONS_BUDGET, left_out,
                                              "earlier user instruction{s} left out")
    if latest and not any(latest[len(_LATEST):].rstrip("…") in line for line in lines):
        lines.append(latest)
    return lines


def within(lines: list[str], budget: int, left_out: int, note: str) -> list[str]:
    """The most recent `lines` that fit in `budget` chars, in order, and a line saying how many
    were left out (`note` with `{s}` for the plural), counting `left_out` from before."""
    kept, used = [], 0
    for line in reversed(lines):
        used += len(line) + 3
        if used > budget:
            break
        kept.append(line)
    left_out += len(lines) - len(kept)
    return kept[::-1] + ([f"({left_out} {note.format(s='s' if left_out != 1 else '')})"] if left_out else [])


def ran_line(call: ToolCall, result: Message | None, command: str | None = None) -> str:
    """`Ran: COMMAND → exit N`, the command as the agent wrote it (cut when long); `command`: the
    call's, when the caller has it."""
    code = exit_status(result) if result is not None else None
    return _RAN + _clip(command or command_of(call) or "", COMMAND_CHARS) + (f" → exit {code}" if code is not None else "")


def file_lines(files: dict[str, str], left_out: int = 0, budget: int = MAX_READ_PATHS) -> list[str]:
    """Every changed path, and the most recent read ones up to a budget; says how many were left out."""
    read = [p for p, v in files.items() if v != "changed"]
    shown = set(read[max(0, len(read) - budget):]) if budget else set()
    lines = [f"{p} ({v})" for p, v in files.items() if v == "changed" or p in shown]
    left_out += len(read) - len(shown)
    if left_out:
        lines.append(f"({left_out} more file{'s' if left_out != 1 else ''} read, not listed)")
    return lines


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
        items = sections.get(name) or ["(none)"]
        lines.extend(f"- {it}" for it in items)
    return "\n".join(lines)


def summary_message_text(body: str) -> str:
    return f"{SUMMARY_HEADER}\n{body}"
