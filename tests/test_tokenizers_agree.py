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
