"""Summaries for deep compaction (SPEC §5; seed 000 §8.3.3, seed 003 §2).

A summarizer turns the messages before a safe cut (plus the previous summary, if any) into text in
the SECTIONS an agent needs to continue. The LLM summarizer (agent layer) uses `summary_request`
and `validate_summary`; the offline default is `extractive.ExtractiveSummarizer`. The sentence and
instruction finders here are shared by both summaries and by fidelity's probes.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator, Protocol, Sequence

from breakwater.core.log.message import Message
from breakwater.core.policy import Policy

SUMMARY_HEADER = "[Summary of prior conversation]"

# the sections of a summary an agent can continue from (pi's, with Claude Code's errors and files):
# the offline summary writes them, the LLM prompt asks for them and the validator checks them
SECTIONS = ("Goal", "Constraints", "Progress", "Decisions", "Next steps", "Critical context", "Errors",
            "Files modified", "Files read")

SUMMARY_SYSTEM_PROMPT = """You are a context compaction engine. You will read the transcript of an agent \
session and write the summary that replaces it in the agent's context. The agent must be able to continue \
the work from your summary alone. Preserve:
1. The goal: the user's task as they stated it.
2. Every instruction, correction and preference the user gave, in the user's own words.
3. Progress: what is done (commands run and their exit status, files changed) and what is in progress.
4. Key decisions and why they were made.
5. The next step, as the assistant last planned it (quote it).
6. Critical context: the current error (its exact message, test id or file:line) and whether it is resolved.
7. Errors met: each one's exact signature and whether it is open or resolved.
8. Files modified (by any means, shell commands too), then files read, with their paths.

Work in two phases.
Phase 1 - write a chronological analysis inside <analysis></analysis> tags: walk the timeline; note each \
user instruction and correction, decision and preference change; track files read, changed or created; \
record errors, blockers and their fixes.
Phase 2 - write the final summary inside <summary></summary> tags, using exactly these headings, in order:
## Goal
## Constraints
## Progress
## Decisions
## Next steps
## Critical context
## Errors
## Files modified
## Files read
Write "- (none)" under a heading with nothing to say. Be concise but keep every actionable detail (paths, \
commands, identifiers, numbers, error messages) verbatim. Only the <summary> block is kept."""


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
    if len(body) > policy.summary_limit:
        return SummaryResult("", False, summarizer, f"summary over {policy.summary_limit} chars ({len(body)})")
    problem = garbled(body)
    if problem:
        return SummaryResult("", False, summarizer, f"garbled summary: {problem}")
    missing = missing_sections(body)
    if missing:
        return SummaryResult("", False, summarizer, f"summary without the section{'s' if len(missing) > 1 else ''} "
                                                    f"{', '.join(missing)}")
    return SummaryResult(body, True, summarizer)


def missing_sections(body: str) -> list[str]:
    """The headings of SECTIONS a summary does not have (as `## Name` lines, in any case)."""
    found = {line[3:].strip().casefold() for line in body.splitlines() if line.startswith("## ")}
    return [name for name in SECTIONS if name.casefold() not in found]


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
# the words of a decision (as whole words, in any case) and their Chinese counterparts
DECISION_WORDS = ("decided", "decide", "will use", "instead", "because", "switched to", "switch to", "let's",
                  "plan is", "i'll", "we'll", "should")
DECISION_CJK = ("决定", "改用", "选择", "因为", "打算")


def _words_pattern(words: tuple[str, ...], cjk: tuple[str, ...]) -> re.Pattern:
    return re.compile(r"(?i)\b(?:" + "|".join(map(re.escape, words)) + r")\b|" + "|".join(cjk))


_DECISION = _words_pattern(DECISION_WORDS, DECISION_CJK)
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



def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def sentences(text: str, min_chars: int = MIN_SENTENCE_CHARS) -> Iterator[str]:
    """Sentences and list items, without their bullets; fragments shorter than `min_chars`, too short
    to state anything, are skipped."""
    if len(text) < min_chars:   # no part of it can be long enough (a chat of short replies)
        return
    for raw in _SENTENCE_END.split(text):
        found = _BULLET.sub("", raw.strip())
        if len(found) >= min_chars:
            yield found


TASK_META = "task"   # a user message's meta: [start, end] of the task statement in its content (set by importers)


# what an agent's harness puts in a user message: a slash command and its output, its caveat, the
# environment or project instructions it prepends, reminders (Claude Code, Codex): no instruction of
# the user, and a user message may hold both (the sanitizer joins user messages in a row)
_WRAPPERS = re.compile(
    r"Caveat: The messages below were generated[^\n]*(?:\n|$)|<(command-name|command-message|command-args|"
    r"local-command-stdout|local-command-stderr|system-reminder|environment_context|user_instructions)>.*?"
    r"(?:</\1>|$)", re.DOTALL)


def user_text(text: str) -> str:
    """A user message without what the agent's harness wrapped into it."""
    return _WRAPPERS.sub("", text).strip() if "<" in text or "Caveat" in text else text


def wrapper_spans(text: str) -> list[tuple[int, int]]:
    """The (start, end) of each piece of harness wrapping in a user message (`user_text` drops them)."""
    if "<" not in text and "Caveat" not in text:
        return []
    return [m.span() for m in _WRAPPERS.finditer(text) if m.end() > m.start()]


def is_wrapper(text: str) -> bool:
    """Whether a user message holds nothing but the harness's wrapping."""
    return not user_text(text)


def task_statement(msg: Message) -> str | None:
    """The task statement an importer marked in a user message (mini-swe-agent's PR description,
    SWE-agent's issue text), without the framework's wrapping; None when it marked none."""
    span = (msg.meta or {}).get(TASK_META) if msg.meta else None
    if isinstance(span, (list, tuple)) and len(span) == 2 and all(isinstance(x, int) for x in span):
        text = msg.content[span[0]:span[1]].strip()
        return text or None
    return None


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


def summary_message_text(body: str) -> str:
    return f"{SUMMARY_HEADER}\n{body}"
