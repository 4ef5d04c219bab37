"""The error facts of a result are the lines the rules pick, however the scan finds them: the
cached one-pass scan in core/outcome.py against the rules applied line by line."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from breakwater.core.message import Message
from breakwater.core.outcome import (_EXIT, _HINTS, ERROR_WORDS, EXIT_TAIL_CHARS, STRONG_ERROR, exit_status,
                                     first_error, salient_errors)

PIECES = ["err", "ERR", "Err", "eRr", "Error:", "error :", "ValueError", "Exception", "FATAL", " fatal",
          "Traceback (most recent", "failed", "Failed", "panic:", "错误", "失败", "超时", "E   assert",
          "e  failed", "E\tx", "E" + " " * 80 + "x", "> ", "\n", "\n", "\r\n", " ", "ok", "denied",
          "npm ERR!", "\u00a0", "\x0b", "E", "e", "Use -v to get more diff", "word"]
PYTEST_E = re.compile(r"[eE][^\S\n]{2,}\w")


def by_lines(text: str, limit: int) -> list[str]:
    """The rules, read off each line: a line holding a hint as written, or a pytest `E   ` line, that
    STRONG_ERROR matches; else the first line mentioning an error word."""
    lines = text.split("\n")
    strong = [line for line in lines
              if (any(h in line for h in _HINTS) or PYTEST_E.match(line)) and STRONG_ERROR.search(line)]
    if strong:
        return strong[:limit]
    return [line for line in lines if any(w in line.lower() for w in ERROR_WORDS)][:1]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.integers(1, 4))
def test_salient_errors_are_the_lines_the_rules_pick(text, limit):
    assert salient_errors(text, limit) == by_lines(text, limit)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join), st.lists(st.integers(1, 4), min_size=2, max_size=4))
def test_a_scan_asked_again_for_more_lines_picks_what_a_first_scan_would(text, limits):
    # masking asks for one line of a result, the summary later for three: the scan goes on from
    # where it stopped (a fresh copy of the text is a text never scanned)
    fresh = "".join(list(text))
    for limit in limits:
        assert salient_errors(fresh, limit) == by_lines(text, limit)
    assert first_error(fresh) == first_error("".join(list(text)))


def test_a_pytest_line_first_in_the_output_counts_however_wide_its_indent():
    out = "E" + " " * 80 + "assert 1 == 2\nok"
    assert salient_errors(out) == [out.split("\n")[0]]
    assert first_error(out) == "E assert 1 == 2"


def test_asking_again_gives_a_fresh_list():
    out = "npm ERR! code E404\n"
    salient_errors(out).append("changed by a caller")
    assert salient_errors(out) == ["npm ERR! code E404"]


EXIT_PIECES = ["exit", "EXIT", "Exit", "ex\u0131t", "ex\u0130t", "ex", "it", "[exit code: 1]", "(exit code 2)",
               "exited with code 3", "exit status: -4", " code ", "status", ":", "7", "-", "[", "]", "(", ")", "\n", "x"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(EXIT_PIECES), max_size=40).map("".join))
def test_the_exit_status_is_the_last_one_the_tail_reports_however_it_is_spelt(text):
    found = [next(g for g in m.groups() if g is not None) for m in _EXIT.finditer(text[-EXIT_TAIL_CHARS:])]
    assert exit_status(Message("t", "tool", text)) == (int(found[-1]) if found else None)
