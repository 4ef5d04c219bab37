"""rs-bpe, the engine exact counts come from where its wheel installs, counts what tiktoken (the
reference) counts: every text of every fixture and sample, both encodings, and the texts where two
BPE implementations could part (special tokens read as text, lone surrogates, long runs, whitespace)."""

import pytest

from breakwater.core.log import tokens
from breakwater.core.log.tokens import ENCODINGS, get_encoding, pieces
from support.counted_texts import FIXTURES, texts_of

EDGES = ["", " ", "\n\n\n", "<|endoftext|>", "<|im_start|>user", "lone \ud800 surrogate \udfff",
         "a" * 70_000, " " * 5000, "\t\r\n" * 300, "😀" * 3000, "中文混合 English 123456789 " * 200,
         "0123456789abcdef" * 2000, "ﬁ ligature, e\u0301 combining, \u200b zero width"]

rs_bpe = pytest.importorskip("rs_bpe.bpe", reason="rs-bpe has wheels for CPython 3.11-3.13 on Linux x86-64 only")


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_rs_bpe_counts_what_tiktoken_counts(encoding, monkeypatch):
    monkeypatch.delenv("BREAKWATER_TOKENIZER", raising=False)
    tokens.engine.cache_clear()
    monkeypatch.setattr(tokens, "_counters", {})
    assert tokens.engine().startswith("rs-bpe")
    fast = tokens.get_count(encoding)
    reference = get_encoding(encoding).encode_ordinary
    texts = EDGES + [t for path in FIXTURES for t in texts_of(path)]
    for text in texts:
        for piece in pieces(text):
            assert fast(piece) == len(reference(piece)), piece[:80]
    tokens.engine.cache_clear()


def test_the_reference_is_chosen_by_the_environment(monkeypatch):
    monkeypatch.setenv("BREAKWATER_TOKENIZER", "tiktoken")
    tokens.engine.cache_clear()
    try:
        assert tokens.engine().startswith("tiktoken ")
        assert tokens.store_namespace("o200k_base").split("|")[1] == tokens.engine()
    finally:
        tokens.engine.cache_clear()


RESIDENT = """
import sys
from breakwater.core.log import tokens

def resident_kb(part):
    total, inside = 0, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and not head[0].endswith(":"):
            inside = len(head) == 6 and part in head[5]
        elif inside and head[0] == "Rss:":
            total += int(head[1])
    return total

text = open(sys.argv[1], encoding="utf-8").read()
counts = [tokens.get_count(name)(text) for name in ("o200k_base", "cl100k_base")]
print(resident_kb("/rs_bpe/"), *counts)
"""


def test_the_tables_rs_bpe_is_built_from_do_not_stay_resident(tmp_path):
    """rs-bpe builds a tokenizer from tables serialized inside its module: the file's pages it read (31 MB
    for o200k_base, 66 MB with the tables built) stayed resident for the whole run, its largest part on a
    first open. Given back once built, in a real process: the counts are the same, for a second encoding
    built after the first gave them back too."""
    import os
    import subprocess
    import sys

    path = FIXTURES[0]
    text = "\n".join(texts_of(path))
    (tmp_path / "text.txt").write_text(text, encoding="utf-8")
    env = dict(os.environ, BREAKWATER_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("BREAKWATER_TOKENIZER", None)
    out = subprocess.run([sys.executable, "-c", RESIDENT, str(tmp_path / "text.txt")], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    resident, o200k, cl100k = map(int, out.stdout.split())
    assert resident < 8 * 1024, f"{resident} kB of rs_bpe's module resident"
    assert o200k == sum(len(get_encoding("o200k_base").encode_ordinary(p)) for p in pieces(text))
    assert cl100k == sum(len(get_encoding("cl100k_base").encode_ordinary(p)) for p in pieces(text))
