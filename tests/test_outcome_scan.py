"""The error facts of a result are the lines the rules pick, however the scan finds them: the
cached scan in core/log/outcome.py (an Aho-Corasick automaton over pieces of the UTF-8 bytes for
candidate lines, each tried in str) against the rules applied line by line."""

from __future__ import annotations

import re
import sys
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from breakwater.core.log import message, outcome
from breakwater.core.log.message import Message
from breakwater.core.log.outcome import (_CANDIDATE, _EXIT, _HINTS, ERROR_WORDS, EXIT_TAIL_CHARS,
                                     STRONG_ERROR, _may_mention, _may_report_exit, error_lines, exit_status, first_error, salient_errors)

# every hint as written and in other cases, the strong forms, pytest's `E` lines with every kind of
# blank (the Unicode ones are several bytes in UTF-8, some sharing a first byte with a character that
# is not blank: ¢ ’ 、), non-ASCII text, a lone surrogate, the Kelvin sign, \r, empty lines
BLANKS = [" ", "\t", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "\u0085", "\u00a0", "\u1680", "\u2000", "\u200a",
          "\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
PIECES = (list(_HINTS) + [h.swapcase() for h in _HINTS if h.isascii()] + list(ERROR_WORDS) + [
    "eRr", "Error:", "error :", "ValueError", "RuntimeError]", "error]", "FATAL", " fatal", "Traceback (most recent",
    "panic:", "E   assert", "e  failed", "E\tx", "E" + " " * 80 + "x", "E", "e", "> ", "\n", "\n", "\n", "\r\n",
    "ok", "npm ERR!", "Use -v to get more diff", "word", "é", "¢", "’", "、", "连接池", "\ud800", "TRACEBAC\u212a", "İ",
    "x"] + BLANKS)
PYTEST_E = re.compile(r"[eE][^\S\n]{2,}\w")
TEXTS = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)


def by_lines(text: str, limit: int) -> list[str]:
    """The rules, read off each line: a line holding a hint as written, or a pytest `E   ` line, that
    STRONG_ERROR matches; else the first line mentioning an error word."""
    lines = text.split("\n")
    strong = [line for line in lines
              if (any(h in line for h in _HINTS) or PYTEST_E.match(line)) and STRONG_ERROR.search(line)]
    if strong:
        return strong[:limit]
    return [line for line in lines if any(w in line.lower() for w in ERROR_WORDS)][:1]


@settings(max_examples=1000, deadline=None)
@given(TEXTS, st.integers(1, 4))
def test_salient_errors_are_the_lines_the_rules_pick(text, limit):
    assert salient_errors(text, limit) == by_lines(text, limit)


@settings(max_examples=300, deadline=None)
@given(TEXTS, st.lists(st.integers(1, 4), min_size=2, max_size=4))
def test_a_scan_asked_again_for_more_lines_picks_what_a_first_scan_would(text, limits):
    # masking asks for one line of a result, the summary later for three: the scan goes on from
    # where it stopped (a fresh copy of the text is a text never scanned)
    fresh = "".join(list(text))
    for limit in limits:
        assert salient_errors(fresh, limit) == by_lines(text, limit)
    assert first_error(fresh) == first_error("".join(list(text)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=400).map("".join), st.integers(1, 4))
def test_long_outputs_too(text, limit):
    # longer than the texts whose encodings are kept: each scan encodes its text afresh
    assert salient_errors(text * 8, limit) == by_lines(text * 8, limit)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=400).map("".join), st.integers(1, 20),
       st.lists(st.tuples(st.integers(1, 8), st.booleans()), min_size=2, max_size=6))
def test_a_long_output_asked_again_once_its_encoding_is_gone(text, times, asks):
    # the summary asks for more lines of results entered long before: the scan goes on over pieces
    # of the text from where the last line found ends, or over the encoding if it is kept again
    fresh = "".join(list(text * times))
    for limit, gone in asks:
        if gone:
            message._ENCODED._entries.clear()   # as when it fills up
        else:
            message.utf8(fresh)   # kept again, as when the lines are counted
        assert salient_errors(fresh, limit) == by_lines(fresh, limit)


def test_a_scan_goes_on_after_the_right_one_of_lines_that_read_alike():
    pad = "\n".join(f"step {k} ok" for k in range(800))   # several pieces long, longer than a kept text
    lines = ["npm ERR! a", pad, "npm ERR! a", pad, "Error: b", pad, "npm ERR! a", "E   assert c", pad, "fatal d"]
    text = "\n".join(lines)
    expected = ["npm ERR! a", "npm ERR! a", "Error: b", "npm ERR! a", "E   assert c", "fatal d"]
    for keep in ([False] * 6, [True, False, True, False, True, False], [False, True] * 3):
        fresh = "".join(list(text))
        for limit, kept in enumerate(keep, 1):
            if kept:
                message.utf8(fresh)
            else:
                message._ENCODED._entries.clear()
            assert salient_errors(fresh, limit) == expected[:limit]


@contextmanager
def pieces_of(size: int):
    """The scan searching `size` bytes first, then twice as many each time up to four times (each
    piece going on to the next newline), so that the texts of a test cross many pieces' ends."""
    was = outcome._FIRST_PIECE_BYTES, outcome._PIECE_BYTES
    outcome._FIRST_PIECE_BYTES, outcome._PIECE_BYTES = size, 4 * size
    try:
        yield
    finally:
        outcome._FIRST_PIECE_BYTES, outcome._PIECE_BYTES = was


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=120).map("".join), st.integers(1, 48),
       st.lists(st.integers(1, 5), min_size=1, max_size=3))
def test_a_scan_over_pieces_of_any_size_picks_the_lines_the_rules_pick(text, size, limits):
    # every hint, E line and blank of PIECES falls across a piece's end for some size
    with pieces_of(size):
        fresh = "".join(list(text))
        for limit in limits:
            assert salient_errors(fresh, limit) == by_lines(text, limit)


def test_lines_longer_than_a_piece_and_hints_at_either_end_of_the_text():
    long_line = "x" * 300 + "npm ERR! deep in a long line" + "y" * 300
    texts = ["Error: at the very start\nok", "ok\nat the very end: fatal", "errERRerrFailedFAILED\nnext error: x",
             "Traceback (most recent call last):\nValueError: v", "E   assert 1\r\nE\u3000\u3000failed\u00a0x",
             "\n".join(["ok", long_line, "y" * 500, "E   assert after a long line", long_line]), "", "\n\n\n", "err",
             "E", "E  x", "\nE  x\n"]
    for size in (1, 2, 3, 7, 64, 1 << 16):
        with pieces_of(size):
            for text in texts:
                for limit in (1, 2, 3, 5):
                    assert salient_errors("".join(list(text)), limit) == by_lines(text, limit), (size, text, limit)


def test_the_bytes_searched_for_an_e_line_hold_every_blank_it_may_start_with():
    # the candidate pattern names the first byte of each blank's UTF-8 form; a blank of Unicode
    # that begins with another byte would hide a pytest line from the scan
    blank = re.compile(r"[^\S\n]")
    for c in map(chr, range(sys.maxunicode + 1)):
        if blank.match(c):
            line = "\nE" + c + c + "assert 1"
            hits = _CANDIDATE.find_matches_as_indexes(line.encode("utf-8", "surrogatepass"))
            assert [start for _, start, _ in hits] == [0], hex(ord(c))


def test_the_bytes_searched_for_an_error_word_hold_every_way_to_write_one():
    # `error_lines` finds a word in the text lowered: a character other than the word's own letters
    # (in either case) whose lowercase is one of them must be in the pattern too
    letters = set("".join(ERROR_WORDS))
    others = {c for c in map(chr, range(sys.maxunicode + 1))
              if c.lower() != c and set(c.lower()) & letters and not c.isascii()}
    assert others == {"\u0130", "\u212a"}   # İ lowers to i and a combining dot, in no error word
    for word in ERROR_WORDS:
        for text in (word, word.upper(), word.capitalize(), word.replace("k", "\u212a")):
            assert _may_mention(text), text


def test_a_pytest_line_first_in_the_output_counts_however_wide_its_indent():
    out = "E" + " " * 80 + "assert 1 == 2\nok"
    assert salient_errors(out) == [out.split("\n")[0]]
    assert first_error(out) == "E assert 1 == 2"


def test_a_line_after_a_dotted_capital_i_is_found_whole():
    # "İ".lower() is two characters: the lines after it were cut at positions of the lowered text
    assert salient_errors("İİİ\nerror here\nok") == ["error here"]
    assert error_lines("İstanbul: connection refused\nok\nİ fatal? no: timed out") == [
        "İstanbul: connection refused", "İ fatal? no: timed out"]


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


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(EXIT_PIECES + ["X", "I", "\u0130x", "xx", "Xİ", "é", "x\n"]), max_size=40).map("".join))
def test_the_exit_hint_is_an_x_and_an_i_as_the_regex_engine_folds_case(text):
    assert _may_report_exit(text) == bool(re.search("(?i)xi", text))
