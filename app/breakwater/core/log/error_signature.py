"""The signature of an error: what identifies it, not the boilerplate around it.

An exception is its type and message (`KeyError: '13'`, the last line of a traceback, not its
`Traceback (most recent call last):` header); a failing test is its id (`tests/test_x.py::test_y`);
a compiler error is its file:line and message. Lines that say only that something failed somewhere
(a traceback header, pytest's separators and tallies, a bare `error`) are no signature: a later,
different error would otherwise "keep" an earlier one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ahocorasick_rs import AhoCorasick, BytesAhoCorasick, MatchKind

from breakwater.core.log.message import Message, kept_utf8, utf8
from breakwater.core.log.outcome import STRONG_ERROR, outcome_facts, salient_errors
from breakwater.core.log.text_cache import text_cached

MAX_LINE_CHARS = 200
_EXCEPTION = re.compile(
    r"^\s*(?:E\s+)?(?:raise\s+)?((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning|Fault|"
    r"NotFound|Invalid\w*))(?::\s*(.*?))?\s*$")
_TEST_ID = re.compile(r"^\s*(?:FAILED|ERROR)\s+(\S+::\S+?)(?:\s+-\s+(.*))?\s*$")
_COMPILER = re.compile(r"^\s*([\w./@+-]+\.\w+)[:(](\d+)(?:[:,]\d+)?\)?:?\s*(?:fatal\s+)?(?:error|Error)"
                       r"(?:\s*\[?\w*\]?)?:?\s*(.*?)\s*$")
_RUST = re.compile(r"^\s*error(?:\[(E\d+)\])?:\s*(.+?)\s*$")
_BOILERPLATE = re.compile(
    r"(?i)^\s*(?:traceback \(most\b.*|during handling of the above exception.*|"
    r"the above exception was the direct cause.*|=+.*=+|-+|_+.*_+|\d+ (?:failed|error|errors)\b.*|"
    r"(?:error|failed|failure|fatal|exception)[:!.]?|short test summary info|"
    r"(?:npm )?err!?\s*(?:a complete log of this run.*)?)\s*$")


# every signature pattern below needs one of these words in its line
_ERROR_WORDS = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Fault", "NotFound", "Invalid", "FAILED", "ERROR",
                "error")
# Aho-Corasick finds the words in a long output three times as fast as the regular expression; in the
# UTF-8 of a text that is not ASCII (see `_lines_naming_an_error`)
_WORDS_IN = AhoCorasick(_ERROR_WORDS, matchkind=MatchKind.LeftmostFirst).find_matches_as_indexes
_WORDS_IN_UTF8 = BytesAhoCorasick([w.encode() for w in _ERROR_WORDS],
                                  matchkind=MatchKind.LeftmostFirst).find_matches_as_indexes
_NAMES_AN_ERROR_IN = re.compile("|".join(_ERROR_WORDS)).search


@dataclass(frozen=True, slots=True)
class Signature:
    kind: str         # exception, test, compiler, line
    text: str         # the signature as the output states it
    head: str         # what must be there: the exception type, the test id, file:line
    detail: str = ""  # the message, whose key terms identify it further


def error_signatures(text: str, limit: int = 3) -> list[Signature]:
    """The signatures of the errors an output states, in order, each once: exception lines, failing
    test ids and compiler errors; else its strongest error line that is not boilerplate."""
    out: dict[str, Signature] = {}
    if _may_hold(text):
        for line in _lines_naming_an_error(text):
            sig = signature_of(line)
            if sig is not None and sig.text not in out:
                out[sig.text] = sig
                if len(out) >= limit:
                    break
    if not out:
        for line in salient_errors(text, limit + 2):
            sig = signature_of(line) or _line(line)
            if sig is not None:
                out.setdefault(sig.text, sig)
            if len(out) >= limit:
                break
    return list(out.values())


FIRST_ERROR = "first error: "
CLEARED_SIGNATURES = 3   # the signatures a cleared result keeps, at most (as many as fidelity's facts take)


def cleared_outcome(result: Message) -> list[str]:
    """What a cleared result (a mask placeholder, a microcompact skeleton) still says of how it went:
    `outcome_facts` (`exit N`, `first error: <line>`), and after them, as `error: <signature>`, the
    signatures of its errors (exception, failing test, compiler error) that the first error line does
    not state: a traceback's header is its first error line, its `KeyError: '13'` the error. Without
    such an error, `outcome_facts` as they are (a preset's placeholders are what they were)."""
    facts = outcome_facts(result)
    first = next((f[len(FIRST_ERROR):] for f in facts if f.startswith(FIRST_ERROR)), None)
    if first is None:
        return facts
    shown = first[:-1] if first.endswith("…") else first   # cut to a readable length
    return facts + [f"error: {s.text}" for s in _cleared_signatures(result.content)
                    if s.kind != "line" and not (s.text in first or s.text.startswith(shown))]


@text_cached(1 << 14)   # asked of the same result by its count, its mask and its skeleton, in every replay
def _cleared_signatures(text: str) -> list[Signature]:
    return error_signatures(text, CLEARED_SIGNATURES)


def _lines_naming_an_error(text: str):
    """The lines of `text` (as str.splitlines cuts them) holding one of the words every signature
    needs, in order: found by searching the whole text, not by trying every line of a long output.
    A text that is not ASCII is searched in its UTF-8 bytes: searching the str makes CPython keep a
    UTF-8 copy inside it for as long as the text lives (an ASCII str is its own), which held 17 MB on
    a 58 MB session and 27 MB on the 31 MB bench session."""
    if text.isascii():
        lines = _lines_holding(text, _WORDS_IN(text), "\n")
    else:
        data = utf8(text)
        lines = (part.decode("utf-8", "surrogatepass") for part in _lines_holding(data, _WORDS_IN_UTF8(data), b"\n"))
    for part in lines:
        for line in part.splitlines():   # other line breaks (\r, \x0c, …) within
            if _NAMES_AN_ERROR_IN(line):
                yield line


def _lines_holding(text, hits, newline):
    """The runs of whole lines of `text` (a str or its UTF-8) that hold the words found at `hits`."""
    end = 0
    for _, at, after in hits:
        if at < end:
            continue   # a later word on a line already given
        start = text.rfind(newline, 0, at) + 1
        end = text.find(newline, after)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]


# a text that holds none of these holds no signature: most results of a session hold none, and an
# ASCII text is searched for all of them in one pass (8 substring scans took 3-10× as long on the
# bench sessions). A text that is not ASCII is searched in its UTF-8 if that is still kept; else by
# str scans, which find a word early in most such texts and keep no UTF-8 copy in the str.
_MAY_HOLD_WORDS = ("Error", "Exception", "FAILED", "ERROR", "error", "Exit", "Warning", "Fault")
_ANY_WORD_IN = AhoCorasick(_MAY_HOLD_WORDS, matchkind=MatchKind.LeftmostFirst).find_matches_as_indexes
_ANY_WORD_IN_UTF8 = BytesAhoCorasick([w.encode() for w in _MAY_HOLD_WORDS],
                                     matchkind=MatchKind.LeftmostFirst).find_matches_as_indexes


def _may_hold(text: str) -> bool:
    if text.isascii():
        return bool(_ANY_WORD_IN(text))
    data = kept_utf8(text)
    if data is not None:
        return bool(_ANY_WORD_IN_UTF8(data))
    return any(w in text for w in _MAY_HOLD_WORDS)


def signature_of(line: str) -> Signature | None:
    line = line.rstrip()
    if len(line) > 4 * MAX_LINE_CHARS or _BOILERPLATE.match(line):
        return None
    m = _TEST_ID.match(line)
    if m:
        return Signature("test", _clip(line.strip()), m.group(1), m.group(2) or "")
    m = _COMPILER.match(line)
    if m:
        return Signature("compiler", _clip(line.strip()), f"{m.group(1)}:{m.group(2)}", m.group(3))
    m = _EXCEPTION.match(line)
    if m and not line.lstrip().startswith(("File ", "from ", "import ")):
        kind, message = m.group(1), (m.group(2) or "").strip()
        return Signature("exception", _clip(f"{kind}: {message}" if message else kind), kind, message)
    m = _RUST.match(line)
    if m and m.group(2):
        return Signature("compiler", _clip(line.strip()), m.group(1) or "error", m.group(2))
    return None


def _line(line: str) -> Signature | None:
    """The fallback: a line that states an error in words of its own. A line of code that names one
    (`this.showError(`, `except (OSError, zipfile.BadZipFile):`) or a numbered line of a file shown
    is no error the output reports."""
    text = " ".join(line.split())
    if len(text) < 8 or _BOILERPLATE.match(text) or not STRONG_ERROR.search(line) \
            or _LISTED.match(text) or _CODE.search(text) or not _STATES_AN_ERROR.search(text):
        return None
    return Signature("line", _clip(text), "", text)


# a line of a numbered listing (`cat -n`, a read tool's `  12→`, `grep -n`'s `12:`)
_LISTED = re.compile(r"^\d+(?:→|\t|:\s|\|)")
# code: a statement's keyword first, an assignment, or a line a statement goes on from
_CODE = re.compile(r"^(?:(?:except|raise|if|elif|while|for|return|assert|def|class|from|import|with|catch|throw|"
                   r"const|let|var|function|case|new|await)\b|(?:this|self)\.|[?:.&|}]\s)|\s=\s|[(\[{,;]$")
# an error word of its own (`error:`, `FAILED`, `tool_use_error`), not the end of a name (`isError`)
_STATES_AN_ERROR = re.compile(r"(?i)(?<![a-z0-9])(?:err!?|errors?|exceptions?|traceback|failed|failure|fatal|panic)"
                              r"(?![a-z0-9])|错误|失败|异常")


def _clip(text: str) -> str:
    return text if len(text) <= MAX_LINE_CHARS else text[: MAX_LINE_CHARS - 1] + "…"
