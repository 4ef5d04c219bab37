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
from bisect import bisect_left
import re
from functools import lru_cache
import unicodedata
from dataclasses import dataclass, replace
from typing import Iterator

from breakwater.core.log.error_signature import Signature, error_signatures
from breakwater.core.log.file_effects import (MODIFIED, READ, command_effects, command_head, file_effects,
                                              in_place_edit)
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.outcome import call_args, command_of, exit_status, reports_errors
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.stages.summarize import (MIN_SENTENCE_CHARS, USER_CONSTRAINT, decision_lines, is_wrapper,
                                              sentences, task_statement, user_instructions, user_text)

CATEGORIES = ("goal", "files", "commands", "errors", "decisions", "pinned")
# what an agent must never lose (issue 12): the goal and constraints, the files it changed,
# the error it is working on, and what the user pinned
PINNED_KINDS = ("goal", "constraint", "file-modified", "last-error", "pinned")

MAX_ERRORS_PER_RESULT = 3
MAX_DECISIONS_PER_MESSAGE = 3
MAX_INSTRUCTIONS_PER_MESSAGE = 10
KEY_WORDS = 8               # the key words of a sentence a matcher looks for, at most
KEY_IDENTS = 3              # the identifiers and numbers it requires, at most
WORD_SHARE = 0.6            # of the key words, at least this share must be there
NEAR = {"goal": 600, "constraint": 300, "file-read": 0, "file-modified": 80, "command": 300, "error": 300,
        "decision": 300, "pinned": 0}
CORRECTION_WEIGHT = 2       # an instruction with a word of correction or constraint counts twice

# one regular expression: str.translate looks each character up in a dict, 50 ns a character, which
# was most of eval's time on a session with non-ASCII text
_PUNCT = re.compile("[" + re.escape("`*\"'“”‘’\\()[]{}<>,;:!?=|→…«»") + "]")
_TAG = re.compile(r"</?[A-Za-z_][\w-]*>")
_TOKEN = re.compile(r"[\w.@/+#~%-]*\w")
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]")
STOP = frozenset("""a about above after again all also am an and any are as at be because been before being
below between both but by can could did do does doing done down during each few for from further had has have
having he her here hers him his how i if in into is it its itself just let lets like me more most my myself
now of off on once or other our ours out over own please same she should so some such than that the their them
then there these they this those through to too under until up us very was we were what when where which while
who whom why will with would you your yours want need make sure think see look going use using get got also
may might must shall via per one two okay ok yes thanks thank hi hello""".split())
NEGATIONS = ("no", "not", "never", "without", "avoid", "don t", "doesn t", "dont", "can t", "cannot", "shouldn t",
             "mustn t", "won t", "isn t", "aren t", "off limits", "forbidden", "disallowed", "nothing", "none",
             "instead of", "rather than", "except", "only", "stop")
NEGATION_WORDS = frozenset(w for n in NEGATIONS for w in n.split())
# the same in Chinese: a negated instruction keeps its negation ("不要修改…" is not "修改…")
NEGATIONS_CJK = ("不要", "不能", "不得", "不许", "不准", "不可", "不用", "无需", "禁止", "避免", "别", "勿", "只能", "只改",
                 "只用", "而不是")
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_CHAR = re.compile(f"[{_CJK}]")
# Chinese has no spaces: a run is cut at its function words and negations, and its key words are the
# pairs of characters left (数据库迁移 -> 数据, 据库, 库迁, 迁移), as memory retrieval reads it
_CJK_CUT = re.compile("|".join(NEGATIONS_CJK) + "|谢谢|好的|明白|收到|辛苦"
                      "|[的了吗呢吧啊呀么我你他她它们是在和与及或就都也还又着过被给让对从向这那个一请帮把之其所而"
                      f"]|[^{_CJK}]+")
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


def status_words(code: int) -> tuple[str, ...]:
    """Every common way to say a command's exit status (`exit code 0`, `exited with status 1`,
    `returned 0`, `→ exit 0`, `each exiting with code 0`), and for success or failure the words that
    say so without the number: a summary's wording never decides whether it carries the fact."""
    c = code
    # "code N" and "status N" stand in every longer form: exit code, status code, with code, exit status
    words = [f"exit {c}", f"exits {c}", f"exited {c}", f"exiting {c}", f"code {c}", f"status {c}", f"rc {c}",
             f"returncode {c}", f"returned {c}", f"returns {c}", f"returning {c}", f"exited with {c}",
             f"exits with {c}", f"exiting with {c}", f"returned with {c}", f"exit value {c}", f"return value {c}",
             f"code of {c}", f"status of {c}"]
    words += ["succeeded", "succeeds", "success", "successful", "successfully", "passed", "passes", "ok", "worked",
              "cleanly", "without errors", "without error", "no errors"] if code == 0 \
        else ["failed", "fails", "failing", "failure", "errored", "crashed", "non-zero", "nonzero", "raised"]
    return tuple(dict.fromkeys(words))


# what says a test or a build failed: a test id or a file:line alone is no failure (a test that failed
# and later passed is named by its id both times)
FAILURE_MARKERS = ("failed", "fails", "failing", "failure", "failures", "error", "errors", "errored", "broke",
                   "broken", "red", "assertionerror", "失败", "错误")


# where a sentence ends: . or ? after a word (not `pip install -e .`, not `...`) and before a blank,
# and the Chinese stops; lines end at newlines. Each becomes a newline, the one break normalise
# keeps. Not `!`: npm says `npm ERR! code ERESOLVE` in one line
_SENTENCE_END = re.compile(r"(?<=[^\s.])[.?](?=\s)|[。？]")
_BLANKS = re.compile(r"[^\S\n]+")
_BREAKS = re.compile(r" ?\n[\s]*")


def normalise(text: str) -> str:
    """Case, width, quoting, markup and punctuation between words do not change a fact; where a
    sentence or a line ends does (a newline: the parts of a fact are found in one, `satisfied`)."""
    # NFKC leaves ASCII as it is, and its casefold is lower
    text = text.lower() if text.isascii() else unicodedata.normalize("NFKC", text).casefold()
    # summaries quote tool calls as JSON, where newlines and quotes come escaped
    text = _TAG.sub(" ", text.replace("\\n", " ").replace("\\t", " "))
    text = _PUNCT.sub(" ", _SENTENCE_END.sub("\n", text))
    return _BREAKS.sub("\n", _BLANKS.sub(" ", text)).strip()


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


def _word(c: str) -> bool:
    # a Chinese or Japanese character is a word of its own: its neighbours are boundaries
    return (c.isalnum() and not _CJK_CHAR.match(c)) or c == "_"


def at_boundary(text: str, start: int, end: int, prefix: bool = False) -> bool:
    """Whether text[start:end] stands on token boundaries: not inside a word, a dotted name or a path
    (a `prefix` may end inside a word)."""
    if start > 0:
        c = text[start - 1]
        if _word(c) or (c in ".-" and start > 1 and _word(text[start - 2])):
            return False
    if end < len(text) and not prefix:
        c = text[end]
        if _word(c) or (c in "./-" and end + 1 < len(text) and _word(text[end + 1])):
            return False
    return True


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
        action = text_action(msg.content) if msg.role == "assistant" else None
        changed = [f"modified {path}" for path, how in action_effects(action) if how == MODIFIED] if action else ()
        return "\n".join((msg.content, *changed)) if changed else msg.content
    parts = [msg.content]
    for c in msg.tool_calls:
        args = call_args(c)
        parts.append(f"{c.name} " + (" ".join(_flatten(args)) if args else c.arguments))
        parts += [f"modified {path}" for path, how in file_effects(c) if how == MODIFIED]
    return "\n".join(parts)


# -- text actions: the command in a reply's text, its output the next user message -----------------
# SWE-agent's text-action parsers take the last fenced block of a reply, mini-swe-agent v1 its one
# ```bash block; the environment answers in a user message (marked an observation by the importer)
_LAST_FENCE = re.compile(r"```[^\n`]*\n(.*?)\n?```(?!.*```)", re.DOTALL)
# SWE-agent's own commands (its tools' text signatures): they read or change a file, never run a shell
SWE_READS = ("open", "filemap")
SWE_CREATES = ("create",)
SWE_OWN = frozenset(("open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert", "search_dir",
                     "search_file", "find_file", "submit", "filemap", "str_replace_editor", "exit_forfeit", "skip"))
_EDITOR_CHANGES = ("create", "str_replace", "insert", "undo_edit")
_UPDATED = re.compile(r"^File updated\.", re.MULTILINE)
_OPEN_FILE = re.compile(r"^\(Open file: ([^)\n]+)\)", re.MULTILINE)


def text_action(text: str) -> str | None:
    """The command a text-action reply gives (its last fenced block), if it gives one."""
    if "```" not in text:
        return None
    m = _LAST_FENCE.search(text)
    action = m.group(1).strip() if m else ""
    return action or None


def action_effects(action: str) -> tuple[tuple[str, str], ...]:
    """(path, MODIFIED or READ) of the files a text action touches: SWE-agent's own commands by their
    signatures (`open path`, `create path`, `str_replace_editor view|create|str_replace path`), any
    other command as a shell command. `edit`/`insert` change the open file: the editor's answer
    names it (`editor_updated`)."""
    words = action.split()
    name = words[0] if words else ""
    if name in SWE_OWN:
        if name in SWE_READS and len(words) > 1:
            return ((words[1], READ),)
        if name in SWE_CREATES and len(words) > 1:
            return ((words[1], MODIFIED),)
        if name == "str_replace_editor" and len(words) > 2:
            return ((words[2], MODIFIED if words[1] in _EDITOR_CHANGES else READ),)
        return ()
    return command_effects(action)


def editor_updated(msg: Message) -> str | None:
    """The file SWE-agent's editor says it updated (`File updated.` after an edit, the open file named
    below it), when a user message is that answer."""
    if "File updated" not in msg.content or not _UPDATED.search(msg.content):
        return None
    m = _OPEN_FILE.search(msg.content)
    return m.group(1).strip() if m and m.group(1).strip() != "n/a" else None


# -- the terms that identify a fact ----------------------------------------------------------------
def _tokens(text: str) -> list[str]:
    return [t.strip(".-/") for t in _TOKEN.findall(normalise(text)) if t.strip(".-/")]


def key_terms(text: str) -> tuple[list[str], list[str]]:
    """(identifiers and numbers, key words) of a sentence: the first are what it names exactly (a
    path, a dotted or snake_case name, a number, a CamelCase name), the second its content words."""
    camel = {w.casefold() for w in re.findall(r"[\w.]+", text) if _CAMEL.search(w)}
    idents, words = [], []
    for t in _tokens(text):
        if any(c.isdigit() for c in t) or any(c in t for c in "_./@#") or t in camel:
            if len(t) >= 2 and t not in idents:
                idents.append(t)
        elif _CJK_CHAR.search(t):
            words += [w for w in _cjk_words(t) if w not in words]
        elif len(t) >= 3 and t not in STOP and t not in NEGATION_WORDS and not t.isdigit():
            stem = stem_of(t)
            if stem not in words:
                words.append(stem)
    return idents, words


def _cjk_words(token: str) -> list[str]:
    """The key words of a token holding Chinese: its words in other scripts (stems), and the pairs of
    characters of its Chinese runs cut at function words and negations."""
    out = [stem_of(w) for w in re.findall(rf"[^{_CJK}]+", token) if len(w) >= 3 and w not in STOP]
    for run in _CJK_CUT.split(token):
        out += [run[i:i + 2] for i in range(len(run) - 1)]
    return out


_SUFFIXES = ("ing", "ed", "es", "s", "e", "ly")
PREFIX = "*"   # a term ending so is a stem: found at the start of a word, whatever ends it


def stem_of(word: str) -> str:
    """A key word as a stem (`touched` and `touch` -> `touch*`): a paraphrase inflects its words."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and word[:-len(suffix)].isalpha():
            return word[:-len(suffix)] + PREFIX
    return word + PREFIX if word.isalpha() else word


def path_tail(path: str) -> str:
    """The last two components of a path: what a summary names whether it writes it absolute or not."""
    parts = [p for p in normalise(path).split("/") if p and p != "."]
    return "/".join(parts[-2:])


# an agent says the same sentence many times (a decision restated, an error seen again): its matcher is made once
@lru_cache(maxsize=4096)
def _text_parts(text: str, idents_max: int = KEY_IDENTS, extra: tuple[tuple[str, ...], ...] = ()
                ) -> tuple[tuple[tuple[str, ...], ...], int, int] | None:
    """(parts, must, need) of a sentence's matcher: its identifiers required, then `extra` parts
    required, then its key words, of which WORD_SHARE must be there."""
    idents, words = key_terms(text)
    idents = sorted(idents[:8], key=len, reverse=True)[:idents_max]
    words = words[:KEY_WORDS]
    if not idents and len(words) < 2:
        return None
    parts = tuple((i,) for i in idents) + extra + tuple((w,) for w in words)
    return parts, len(idents) + len(extra), math.ceil(WORD_SHARE * len(words))


def negated(text: str) -> bool:
    norm = f" {normalise(text)} "
    return any(f" {w} " in norm for w in NEGATIONS) or "n t " in norm or any(w in norm for w in NEGATIONS_CJK)


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
    acted = _text_actions(log.messages)   # reply id -> the command its text gives, answered by the next message
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


def _text_actions(messages) -> dict[str, str]:
    """The replies whose text gives a command that the next message answers as an observation."""
    out = {}
    for m, after in zip(messages, messages[1:]):
        if m.role == "assistant" and not m.tool_calls and after.role == "user" and after.is_observation:
            action = text_action(m.content)
            if action:
                out[m.id] = action
    return out


class _Said:
    """What the assistant has said so far, normalised: a user message that repeats it pasted it."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.text = ""
        self.joined = 0

    def add(self, text: str) -> None:
        if text.strip():
            self.parts.append(normalise(text))

    def holds(self, sentence: str) -> bool:
        norm = normalise(sentence)
        if len(norm) < PASTED_CHARS:
            return False
        if self.joined < len(self.parts):
            self.text, self.joined = "\n".join(self.parts), len(self.parts)
        return norm in self.text


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
        shaped = _text_parts(goal) if goal else None
        if shaped:
            col.add("goal", "goal", goal[:300], turn, msg.id, *shaped)
            goal_seen = True
    found = 0
    if task is not None:
        # the framework's rules around the task statement ("DO NOT MODIFY: Tests"): those that say so
        for s in user_instructions(_prose(msg.content.replace(task, "\n")))[:MAX_INSTRUCTIONS_PER_MESSAGE]:
            shaped = _text_parts(s, extra=(NEGATIONS + NEGATIONS_CJK,) if negated(s) else ())
            if shaped:
                col.add("goal", "constraint", s[:300], turn, msg.id, *shaped)
        return goal_seen
    for s in _sentences(_prose(user_text(msg.content))):
        if found >= MAX_INSTRUCTIONS_PER_MESSAGE:
            break
        if s == goal or s.endswith(("?", "？")) or _code_like(s) or said.holds(s):
            continue
        shaped = _text_parts(s, extra=(NEGATIONS + NEGATIONS_CJK,) if negated(s) else ())
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
    return letters < 0.7 * len(sentence) or (len(sentence.split()) < 3 and not _CJK_CHAR.search(sentence))


CJK_SENTENCE_CHARS = 6   # "不要修改迁移文件" says as much as a sentence twice as long in English


def _sentences(text: str) -> Iterator[str]:
    return sentences(text, CJK_SENTENCE_CHARS if _CJK_CHAR.search(text) else MIN_SENTENCE_CHARS)


def _assistant(msg: Message, turn: int, col: _Collector, answered: set, action: str | None = None) -> None:
    text = msg.content.strip()
    if text:
        for s in [d for d in decision_lines(text) if _CHOICE.search(d)][:MAX_DECISIONS_PER_MESSAGE]:
            shaped = _text_parts(s)
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
        return _text_parts(sig.detail)
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
