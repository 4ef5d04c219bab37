"""How a tool call went, as its result says: the exit status and the lines that state an error.

Masking and microcompact keep these when they clear a result, the extractive summary lists the
error lines, and fidelity's probes look for the same facts, so all of them read a result the
same way.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Iterator

from ahocorasick_rs import MATCHKIND_LEFTMOST_FIRST, BytesAhoCorasick

from breakwater.core.log.message import Message, ToolCall, kept_utf8, utf8
from breakwater.core.log.text_cache import TextCache

# the argument names agents give a file path and a shell command (Claude Code, Codex, SWE-agent, ours)
PATH_KEYS = ("path", "file_path", "filePath", "file", "filename", "target_file")
COMMAND_KEYS = ("command", "cmd")
CHANGE_TOOLS = ("write_file", "edit", "apply_patch", "str_replace_editor", "Write", "Edit", "MultiEdit")

ERROR_WORDS = ("error", "exception", "traceback", "failed", "failure", "fatal", "panic", "eresolve", "denied",
               "timed out", "refused", "错误", "失败", "异常", "超时")
# a line that states an error (npm ERR!, pytest's `E   AssertionError` or `E   assert ...`, `error:`, a
# traceback), not one that mentions it; pytest's other `E` lines ("Use -v to get more diff", diff
# details) and its `>` source lines only surround the error (blanks are [^\S\n]: a line never runs
# into the next)
STRONG_ERROR = re.compile(
    r"(?i)^(?!>[^\S\n])(?:.*?(?:err!|\berror\b[^\S\n]*[:\]]|\w(?:error|exception)\b|traceback \(most|\bpanic:|错误|失败|异常)"
    r"|e[^\S\n]{2,}(?:assert|failed)\b|[^\S\n]*fatal\b|failed\b)")
# a line STRONG_ERROR matches holds one of these words (as written, in capitals or capitalised) or
# is a pytest `E   ` line: only such lines are tried
_HINTS = tuple(dict.fromkeys(v for h in ("err", "exception", "fatal", "traceback", "failed", "panic")
                             for v in (h, h.upper(), h.capitalize()))) + ("错误", "失败", "异常")
_E_LINE = re.compile(r"[eE][^\S\n]{2,}\w")
# The lines to try are found in the text's UTF-8 encoding by one Aho-Corasick automaton, which reports
# every hit of a piece in one call (a regex searched again after each line cost a call and a match
# object per hit, ten times as long on the bench session): a hint (the same in UTF-8), or a newline,
# `e` or `E` and a byte a blank other than the newline can begin with (U+0085 and U+00A0 start with
# C2, U+1680 with E1, U+2000-U+205F with E2, U+3000 with E3). That is a superset: each line found is
# decoded and tried by the rule in str (`_try`). Leftmost-first, as a regex alternation: a hit is the
# first place from where the scan is on that any needle begins.
_BLANK_LEADS = b"\t\x0b\x0c\r\x1c\x1d\x1e\x1f\x20\xc2\xe1\xe2\xe3"
_CANDIDATE = BytesAhoCorasick([b"\n" + e + bytes([b]) for e in (b"e", b"E") for b in _BLANK_LEADS]
                              + [h.encode("utf-8") for h in _HINTS], matchkind=MATCHKIND_LEFTMOST_FIRST)
# a text that mentions an error word holds it, once its ASCII letters are lowered, in its bytes as
# written, the k of "traceback" perhaps as the Kelvin sign, the one other character whose lowercase is
# one of the words' letters (`error_lines` reads the text lowered): a superset, the lines are then
# found by `error_lines`
_MENTION = BytesAhoCorasick(list(dict.fromkeys(v.encode("utf-8") for w in ERROR_WORDS
                                               for v in (w, w.replace("k", "\u212a")))),
                            matchkind=MATCHKIND_LEFTMOST_FIRST)   # what the SIMD prefilter takes
_EXIT = re.compile(r"\[exit code:? (-?\d+)\]|\(exit code:? (-?\d+)\)|\bexit(?:ed with)? (?:code|status):? (-?\d+)",
                   re.IGNORECASE)
# every text _EXIT matches holds "exit" in some case, so an x and an i as the regex engine folds case
# (İ and ı among them): an output that holds none is passed by without trying the regex
_EXIT_I = frozenset("iI\u0130\u0131")
EXIT_TAIL_CHARS = 400       # an exit status is reported at the end of the output
ERROR_LINE_CHARS = 160      # enough to identify an error; a stack of them is not kept


def exit_status(result: Message) -> int | None:
    """The exit status recorded with a tool result (tier 1's metadata), else the last one its output reports."""
    meta = result.meta
    if meta:
        source = meta.get("source")
        for where in (meta, source if isinstance(source, dict) else {}):
            code = where.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool):
                return code
    code = _EXITS.get(result.content)
    if code is None:
        code = _reported_exit(result.content[-EXIT_TAIL_CHARS:])
        _EXITS.put(result.content, code)
    return None if code is _UNREPORTED else code


# asked of each result by masking, microcompact and the summary: kept by the output's identity, which
# costs less than slicing its tail and hashing that for every ask
_EXITS = TextCache(1 << 16)
_UNREPORTED = object()


def _reported_exit(tail: str) -> int | object:
    if not _may_report_exit(tail):
        return _UNREPORTED
    found = _UNREPORTED
    for m in _EXIT.finditer(tail):
        found = int(next(g for g in m.groups() if g is not None))
    return found


def _may_report_exit(tail: str) -> bool:
    """Whether `tail` holds an x followed by an i, in either case: found by str.find, which passes over
    a tail with a few x's many times faster than a regex trying a character class at each position."""
    for x in ("x", "X"):
        at = tail.find(x)
        while at >= 0:
            if tail[at + 1:at + 2] in _EXIT_I:
                return True
            at = tail.find(x, at + 1)
    return False


def error_lines(text: str, limit: int = 20) -> list[str]:
    """Lines that mention an error, in order, each once (C-level substring search, no regex backtracking)."""
    lower = text.lower()
    if len(lower) != len(text):
        # İ lowers to two characters (i and a combining dot), which moved every line after it; it is in
        # no error word either way, and the dotless ı is one character in both cases
        lower = text.replace("\u0130", "\u0131").lower()
    starts: set[int] = set()
    for word in ERROR_WORDS:
        pos = lower.find(word)
        found = 0
        while pos >= 0 and found < limit:
            starts.add(lower.rfind("\n", 0, pos) + 1)
            found += 1
            nl = lower.find("\n", pos)
            pos = lower.find(word, nl) if nl >= 0 else -1
    out = []
    for start in sorted(starts)[:limit]:
        end = text.find("\n", start)
        out.append(text[start: end if end >= 0 else len(text)])
    return out


def salient_errors(text: str, limit: int = 3) -> list[str]:
    """The first lines that state an error, else the first line that merely mentions one."""
    return list(_salient(text, limit))


# text -> (the strong lines found so far, the byte of its UTF-8 encoding where the scan stopped or _DONE,
# the fallback line once the scan ended without one): masking and microcompact ask for the first
# error line of every result as it arrives, the summary and fidelity for the first few of some, so a
# text is scanned only as far as asked yet
_SCANS = TextCache(1 << 16)
_DONE = -1


def _salient(text: str, limit: int) -> tuple[str, ...]:
    scan = _SCANS.get(text)
    strong, pos, fallback = scan if scan is not None else ((), 0, None)
    changed = scan is None
    if len(strong) < limit and pos != _DONE:
        data = utf8(text) if pos == 0 else kept_utf8(text)
        if data is None:
            strong, pos = _scan_on(text, strong, pos, limit)
        else:
            strong, stop = _scan(data, strong, pos, limit)
            pos = stop if stop < len(data) else _DONE
        changed = True
    picked = strong[:limit]
    if not picked and fallback is None:
        fallback, changed = _mention(text), True   # the same whatever the limit
    if changed:
        _SCANS.put(text, (strong, pos, fallback))
    return picked or fallback


def _scan(data: bytes, strong: tuple[str, ...], pos: int, limit: int) -> tuple[tuple[str, ...], int]:
    """The error lines of `data` from byte `pos` on, after `strong`, until there are `limit`: (the
    lines, where the scan stopped: at the newline after the last one, or at the end). The lines come
    in order: each one found is tried once. The bytes are searched a piece at a time, each ending
    before a newline, so a scan that finds its lines soon searches little of a long text and a text
    full of hints never has all of them listed at once."""
    found, n = list(strong), len(data)
    if pos == 0 and data[:1] in (b"e", b"E"):   # an `E   ` line first in the output has no newline before it
        pos = _line_end(data, 0)
        _try(data, 0, pos, found, False)
    if len(found) >= limit:
        return tuple(found), pos
    hits, view = _CANDIDATE.find_matches_as_indexes, memoryview(data)
    for base, end in _pieces(data, pos):   # pos is at a newline: an `E   ` line right after it is found too
        for _, start, _ in hits(view[base:end]):
            start += base
            if start < pos:   # in a line already tried
                continue
            hinted = data[start] != 10   # a hint found in the bytes is one in the line
            start = data.rfind(b"\n", 0, start) + 1 if hinted else start + 1
            pos = _line_end(data, start)
            _try(data, start, pos, found, hinted)
            if len(found) >= limit:
                return tuple(found), pos
    return tuple(found), n


def _pieces(data: bytes, pos: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the pieces `data` is searched in from `pos` on, each ending at a newline (or the
    end) some bytes on: no needle holds a newline but first, so none is cut at a piece's end."""
    n, width = len(data), _FIRST_PIECE_BYTES
    while pos < n:
        end = data.find(b"\n", pos + width) if pos + width < n else -1
        end = n if end < 0 else end
        yield pos, end
        pos, width = end, min(2 * width, _PIECE_BYTES)


# the first piece is small, the next ones each twice the last up to the largest: most scans stop at
# the first error line, which most outputs that hold one hold early (on the bench session 6 MB of
# the 29 MB scanned that way were needed)
_FIRST_PIECE_BYTES, _PIECE_BYTES = 1 << 12, 1 << 16


def _scan_on(text: str, strong: tuple[str, ...], pos: int, limit: int) -> tuple[tuple[str, ...], int]:
    """`_scan` going on from byte `pos` once the text's encoding is no longer kept (the summary asks
    for more lines of results entered long before): from the character where the last line found
    ends, over pieces of the text encoded one at a time, each twice the last, so a scan that finds
    its lines soon encodes little of the text (about a quarter of it, on the bench session)."""
    found, n = strong, len(text)
    at, width = _end_of(text, strong[-1], strong.count(strong[-1])), _PIECE_CHARS
    while at < n:   # text[at] is the newline after a line already tried
        end = n if at + width >= n else text.rfind("\n", at + 1, at + width)
        if end < 0:   # a line longer than the piece: it ends the piece
            end = text.find("\n", at + width)
            end = n if end < 0 else end
        piece = text[at:end].encode("utf-8", "surrogatepass")
        found, stop = _scan(piece, found, 0, limit)
        if len(found) >= limit:
            return found, _DONE if end == n and stop == len(piece) else pos + stop
        at, pos, width = end, pos + len(piece), 2 * width
    return found, _DONE


_PIECE_CHARS = 4_096


def _end_of(text: str, line: str, nth: int) -> int:
    """Where the `nth` line of `text` that reads `line` ends (at its newline). A line the rule picks is
    picked wherever it stands, so the last line a scan found is the `nth` line that reads so, `nth`
    being how many times the scan found it."""
    if text.startswith(line + "\n"):
        if nth == 1:
            return len(line)
        nth -= 1
    needle = "\n" + line + "\n"
    at = text.find(needle)
    for _ in range(nth - 1):
        at = text.find(needle, at + 1)
    return at + 1 + len(line)


def _try(data: bytes, start: int, end: int, found: list[str], hinted: bool) -> None:
    """The rule, on the line's text: a line holding a hint or starting as pytest's `E   ` lines do
    states an error when STRONG_ERROR matches it."""
    line = data[start:end].decode("utf-8", "surrogatepass")
    if (hinted or _E_LINE.match(line) or any(h in line for h in _HINTS)) and STRONG_ERROR.search(line):
        found.append(line)


def _mention(text: str) -> tuple[str, ...]:
    """`error_lines(text, limit=1)`, asked only of a text that may hold an error word."""
    return tuple(error_lines(text, limit=1)) if _may_mention(text) else ()


def _may_mention(text: str) -> bool:
    data = utf8(text).lower()   # bytes: only the ASCII letters change
    view = memoryview(data)
    return any(_MENTION.find_matches_as_indexes(view[start:end]) for start, end in _pieces(data, 0))


def _line_end(data: bytes, start: int) -> int:
    end = data.find(b"\n", start)
    return end if end >= 0 else len(data)


def first_error(text: str) -> str | None:
    """The first error line of an output, whitespace collapsed and cut to a readable length."""
    found = [line for line in _salient(text, 1) if line.strip()]
    if not found:
        return None
    line = " ".join(found[0].split())
    return line if len(line) <= ERROR_LINE_CHARS else line[: ERROR_LINE_CHARS - 1] + "…"


def outcome_facts(result: Message) -> list[str]:
    """What a cleared result still says of how it went: `exit N` and `first error: …`, when known."""
    facts = []
    code = exit_status(result)
    if code is not None:
        facts.append(f"exit {code}")
    if code != 0:
        err = first_error(result.content)
        if err:
            facts.append(f"first error: {err}")
    return facts


def parsed_arguments(arguments: str):
    """A call's arguments read as JSON (`{}` when empty), or the text itself when it is not JSON.
    Shared by every caller (microcompact, the summary and fidelity each read a call several
    times): read it, never change it."""
    return _parse(arguments) if len(arguments) > CACHED_ARGUMENTS_CHARS else _parse_cached(arguments)


def _parse(arguments: str):
    try:
        return json.loads(arguments) if arguments else {}
    except (ValueError, RecursionError):
        return arguments


CACHED_ARGUMENTS_CHARS = 4_000   # longer ones (a whole file being written) are parsed again, not kept
_parse_cached = lru_cache(maxsize=1 << 12)(_parse)


def call_args(call: ToolCall) -> dict:
    """The arguments as a dict ({} when they are not a JSON object); shared: never change it."""
    args = parsed_arguments(call.arguments)
    return args if isinstance(args, dict) else {}


def command_of(call: ToolCall) -> str | None:
    """The shell command a call runs, if it runs one."""
    if call.name in CHANGE_TOOLS:
        return None
    cmd = next((v for k in COMMAND_KEYS if (v := call_args(call).get(k))), None)
    if isinstance(cmd, list):
        cmd = " ".join(str(x) for x in cmd)
    return cmd if isinstance(cmd, str) and cmd.strip() else None


def reports_errors(result: Message, call: ToolCall | None) -> bool:
    """Whether a result's error lines are errors: the tool said it failed (Claude Code's `is_error`),
    or a command failed (or its status is unknown); not the contents of a file that was read or
    written, a command that succeeded, or what another tool returned (a subagent's report, a plan)."""
    if call is not None and call.name in CHANGE_TOOLS:
        return False
    flag = result.meta.get("is_error") if result.meta else None
    if isinstance(flag, bool):
        return flag
    if call is not None and not any(call_args(call).get(k) for k in COMMAND_KEYS):
        return False
    return exit_status(result) != 0
