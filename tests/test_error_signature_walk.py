"""error_signatures looks only at the lines that name one of the words a signature needs; it must
give what trying every line (as str.splitlines cuts them) gives."""
from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from breakwater.core.log.error_signature import _may_hold, error_signatures, signature_of

PIECES = ["ok line", "KeyError: '13'", "FAILED tests/a.py::t - boom", "src/x.c:12:3: error: bad",
          "error[E0308]: mismatched types", "Traceback (most recent call last):", '  File "x", line 1',
          "ValueError", "no Error here: x", "", "Exit 1", "warning", "KeyboardInterrupt", "FileNotFound: y",
          "😀 中文", "ValueError: 😀 bad"]
ENDS = ["\n", "\r\n", "\r", "\x0c", "\u2028", " tail\n"]


def every_line(text: str, limit: int = 3) -> list:
    out: dict = {}
    for line in text.splitlines():
        sig = signature_of(line)
        if sig is not None and sig.text not in out:
            out[sig.text] = sig
            if len(out) >= limit:
                break
    return list(out.values())


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(ENDS)), max_size=14))
def test_the_signatures_are_those_of_every_line(parts):
    text = "".join(a + b for a, b in parts)
    found = every_line(text) if _may_hold(text) else []
    if found:   # else the fallback (the strongest error line) decides, as it did before
        assert error_signatures(text) == found


def test_a_text_searched_for_errors_keeps_no_utf8_copy():
    """Searching a str that is not ASCII in Rust makes CPython keep a UTF-8 copy inside it for as long
    as it lives (sys.getsizeof counts it): 17 MB of a 58 MB session's tool results, 27 MB on the
    bench session. The search goes over the text's UTF-8 bytes instead, and finds the same lines."""
    text = "".join(["déjà vu ✓\n" * 200, "Traceback (most recent call last):\n", "KeyError: 'ключ'\n",
                    "FAILED tests/t.py::test_é - résumé\n"])
    size = sys.getsizeof(text)
    found = error_signatures(text)
    assert [s.text for s in found] == ["KeyError: 'ключ'", "FAILED tests/t.py::test_é - résumé"]
    assert sys.getsizeof(text) == size


MAY_HOLD_WORDS = ("Error", "Exception", "FAILED", "ERROR", "error", "Exit", "Warning", "Fault")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES + ["Erro", "rror", "Exceptio", "Faul", "é", "x" * 300]), max_size=30),
       st.booleans())
def test_may_hold_is_any_word_in_the_text(parts, kept):
    """One pass over the text (ASCII, or the UTF-8 kept of a long one) finds what eight scans found."""
    from breakwater.core.log.message import LONG_TEXT, utf8

    text = "".join(parts)
    if kept and not text.isascii():
        text = text + "é" * (LONG_TEXT + 1)   # long enough that its UTF-8 is kept a while
        utf8(text)
    assert _may_hold(text) == any(w in text for w in MAY_HOLD_WORDS)
