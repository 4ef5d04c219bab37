"""The count store (core/log/count_store.py): counts kept between runs are tiktoken's, found again by
another process without loading the tokenizer, written by several processes at once, bounded, and a
damaged file is rebuilt, never trusted."""

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from breakwater.core.log import count_store
from breakwater.core.log import tokens
from breakwater.core.log.tokens import STORED_FROM_CHARS, TokenCounter, store_namespace
from support.counted_texts import FIXTURES, ROOT, texts_of



@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of this test's own, and no store object left from another test."""
    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(count_store, "_stores", {})
    return tmp_path / "cache"


def reopened(encoding: str) -> TokenCounter:
    """A counter as a new process makes it: a store object of its own on the same file."""
    count_store._stores.clear()
    return TokenCounter(encoding)


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_cached_fresh_and_tiktoken_agree_on_every_fixture(cache, encoding):
    reference = TokenCounter(encoding, store=False)
    for path in FIXTURES:
        texts = texts_of(path)
        want = [reference.exact_text(t) for t in texts]
        first = reopened(encoding)
        assert [first.exact_text(t) for t in texts] == want, path.name
        first.flush()
        again = reopened(encoding)
        assert [again.exact_text(t) for t in texts] == want, path.name
        assert again._enc is None, f"{path.name}: the tokenizer was loaded for counts the store holds"
        assert again.tokenized_chars == 0 and again.exact_encoded_chars == sum(map(len, set(texts)))


def test_short_texts_past_a_budget_are_counted_not_stored(cache, monkeypatch):
    """A chat of a million short messages would fill the store and pay a lookup per message where the
    tokenizer counts as fast: past SHORT_LOOKUPS short texts a counter counts them."""
    monkeypatch.setattr(tokens, "SHORT_LOOKUPS", 10)
    shorts = [f"msg {i}" for i in range(30)]
    long = "x y " * (STORED_FROM_CHARS // 4)
    counter = reopened("o200k_base")
    for t in shorts + [long]:
        counter.exact_text(t)
    counter.flush()
    again = reopened("o200k_base")
    again.exact_text(long)
    for t in shorts[:10]:
        again.exact_text(t)
    assert again._enc is None
    again.exact_text(shorts[10])
    assert again.tokenized_chars == len(shorts[10])


def test_a_count_is_found_only_by_its_own_namespace(cache):
    counter = TokenCounter("o200k_base")
    text = "héllo wörld " * 50   # 600 characters: stored
    counter.exact_text(text)
    counter.flush()
    other = reopened("cl100k_base")
    assert other.exact_text(text) == TokenCounter("cl100k_base", store=False).exact_text(text)
    assert other.tokenized_chars == len(text)
    assert store_namespace("o200k_base") != store_namespace("cl100k_base")


SIMULATE_TWICE = textwrap.dedent("""
    import contextlib, io, sys
    from breakwater.cli import build_parser, wanted_command
    from breakwater.core.log import count_store, tokens
    longest, tokenized = [0], tokens.TokenCounter._tokenized
    def counted(self, text):
        longest[0] = max(longest[0], len(text))
        return tokenized(self, text)
    tokens.TokenCounter._tokenized = counted
    argv = ["simulate", sys.argv[1], "--json"]
    args = build_parser(wanted_command(argv)).parse_args(argv)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        args.func(args)
    count_store.flush_all()
    print(out.getvalue().strip())
    print(longest[0])   # the longest text the tokenizer counted
""")


def test_a_reopened_session_counts_nothing_and_prints_the_same(cache):
    session = ROOT / "sample_sessions" / "long-refactor.jsonl"
    env = dict(os.environ, BREAKWATER_CACHE_DIR=str(cache))
    runs = [subprocess.run([sys.executable, "-c", SIMULATE_TWICE, str(session)], env=env, capture_output=True,
                           text=True, check=True).stdout.splitlines() for _ in range(2)]
    (first, longest_first), (second, longest_second) = runs
    assert json.loads(first) == json.loads(second) and first == second
    assert int(longest_first) > 10_000 and int(longest_second) == 0   # no tokenizer on the reopen


def test_the_console_script_keeps_its_counts(cache):
    """`simulate` ends its process with os._exit: the counts are written before."""
    session = ROOT / "sample_sessions" / "npm-install-flood.jsonl"
    env = dict(os.environ, BREAKWATER_CACHE_DIR=str(cache))
    subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(session), "--json"], env=env,
                   capture_output=True, check=True)
    with sqlite3.connect(cache / "counts.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM counts").fetchone()[0] > 10


WRITER = textwrap.dedent("""
    import sys
    from breakwater.core.log import count_store
    from breakwater.core.log.tokens import TokenCounter
    count_store.FLUSH_ROWS = 5          # many small transactions, interleaved with the other writers'
    texts = [f"text {i} " * (i % 40 + 40) + "é" * (i % 3) for i in range(int(sys.argv[1]), int(sys.argv[2]))]
    counter = TokenCounter("o200k_base")
    for t in texts:
        counter.exact_text(t)
    counter.flush()
    print(counter.tokenized_chars)
""")


def test_processes_writing_at_once_lose_nothing_and_corrupt_nothing(cache):
    env = dict(os.environ, BREAKWATER_CACHE_DIR=str(cache))
    # four processes, overlapping ranges of texts: the same key written by several at once
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(k * 150), str(k * 150 + 300)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    texts = [f"text {i} " * (i % 40 + 40) + "é" * (i % 3) for i in range(0, 750)]
    fresh = TokenCounter("o200k_base", store=False)
    again = reopened("o200k_base")
    assert [again.exact_text(t) for t in texts] == [fresh.exact_text(t) for t in texts]
    assert again._enc is None
    with sqlite3.connect(cache / "counts.sqlite3") as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute("SELECT count(*) FROM counts").fetchone()[0]
        assert rows == 750 == conn.execute("SELECT v FROM meta WHERE k = 'rows'").fetchone()[0]


def filled(cache: Path, texts: list[str]) -> None:
    counter = reopened("o200k_base")
    for t in texts:
        counter.exact_text(t)
    counter._store.close()


TEXTS = [f"line {i}: " + "abc def " * (i % 50 + 40) for i in range(400)]   # all stored: 300+ characters


def test_a_file_of_garbage_is_moved_aside_and_rebuilt(cache):
    cache.mkdir(parents=True)
    (cache / "counts.sqlite3").write_bytes(os.urandom(50_000))
    fresh = TokenCounter("o200k_base", store=False)
    counter = reopened("o200k_base")
    assert [counter.exact_text(t) for t in TEXTS] == [fresh.exact_text(t) for t in TEXTS]
    counter.flush()
    assert (cache / "counts.sqlite3.damaged").exists()
    assert [reopened("o200k_base").exact_text(t) for t in TEXTS] == [fresh.exact_text(t) for t in TEXTS]


def test_pages_overwritten_are_never_trusted(cache):
    filled(cache, TEXTS)
    path = cache / "counts.sqlite3"
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * 4096
    for at in range(4096, len(data), 4096):   # every page after the first: a few bytes each
        data[at + 100:at + 140] = os.urandom(40)
    path.write_bytes(bytes(data))
    fresh = TokenCounter("o200k_base", store=False)
    counter = reopened("o200k_base")
    assert [counter.exact_text(t) for t in TEXTS] == [fresh.exact_text(t) for t in TEXTS]


def test_a_changed_count_is_caught_by_its_check(cache):
    filled(cache, TEXTS)
    with sqlite3.connect(cache / "counts.sqlite3") as conn:
        conn.execute("UPDATE counts SET n = n + 1")   # a bit flipped in every count: SQLite cannot tell
    fresh = TokenCounter("o200k_base", store=False)
    counter = reopened("o200k_base")
    assert [counter.exact_text(t) for t in TEXTS] == [fresh.exact_text(t) for t in TEXTS]
    assert (cache / "counts.sqlite3.damaged").exists()


def test_the_store_is_bounded(cache, monkeypatch):
    monkeypatch.setenv("BREAKWATER_COUNT_CACHE_ROWS", "100")
    monkeypatch.setattr(count_store, "FLUSH_ROWS", 10)
    counter = reopened("o200k_base")
    for t in TEXTS:
        counter.exact_text(t)
    counter.flush()
    with sqlite3.connect(cache / "counts.sqlite3") as conn:
        rows = conn.execute("SELECT count(*) FROM counts").fetchone()[0]
        assert 75 <= rows <= 100
        assert rows == conn.execute("SELECT v FROM meta WHERE k = 'rows'").fetchone()[0]
    # the newest are kept: they are found without the tokenizer
    last = reopened("o200k_base")
    for t in TEXTS[-60:]:
        last.exact_text(t)
    assert last._enc is None


def test_turned_off_it_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("BREAKWATER_COUNT_CACHE", "off")
    counter = reopened("o200k_base")
    counter.exact_text("hello " * 100)
    counter.flush()
    assert not (cache / "counts.sqlite3").exists()


def test_a_cache_folder_that_cannot_be_made_costs_a_recount_not_an_error(cache, monkeypatch):
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("a file where the folder should be")
    fresh = TokenCounter("o200k_base", store=False)
    counter = reopened("o200k_base")
    assert [counter.exact_text(t) for t in TEXTS] == [fresh.exact_text(t) for t in TEXTS]
    counter.flush()
    assert counter._store.broken


def test_lookups_share_a_read_transaction_that_ends_on_its_own(cache, monkeypatch):
    """A burst of lookups is one read transaction (each SELECT on its own took WAL's read lock: 10.7
    against 4.8 µs a lookup), ended READ_SECONDS later even if nothing more is asked (a reader holding
    its snapshot would keep other processes' checkpoints from emptying the WAL), and before a write."""
    monkeypatch.setattr(count_store, "READ_SECONDS", 0.2)
    texts = [f"{i} " + "word " * 80 for i in range(50)]
    first = reopened("o200k_base")
    for t in texts:
        first.exact_text(t)
    first.flush()
    again = reopened("o200k_base")
    store = again._open_store()
    assert [again.exact_text(t) for t in texts] == [first.exact_text(t) for t in texts]
    assert store.hits == 50 and store._reads == 1 and store._conn.in_transaction
    other = sqlite3.connect(store.path)   # another process writes meanwhile: it is not kept waiting
    other.execute("UPDATE meta SET v = v WHERE k = 'clock'")
    other.commit()
    import time
    deadline = time.monotonic() + 5
    while store._conn.in_transaction and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not store._conn.in_transaction
    again.exact_text("a new text " * 30)   # a miss: counted, written at the flush
    assert store._reads == 2 and store._conn.in_transaction
    again.flush()
    assert not store._conn.in_transaction
    assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0   # not busy: no reader holds it


def test_short_texts_are_counted_not_looked_up_once_the_tokenizer_is_loaded(cache):
    """A short text costs the tokenizer less than a lookup; a run that had to load it counts them and
    stores them all the same, so that a reopen still loads no tokenizer."""
    shorts = [f"msg {i}" for i in range(40)]
    counter = reopened("o200k_base")
    counter.exact_text("x y " * STORED_FROM_CHARS)   # not stored yet: the tokenizer is loaded
    store = counter._store
    misses = store.misses
    want = [TokenCounter("o200k_base", store=False).exact_text(t) for t in shorts]
    assert [counter.exact_text(t) for t in shorts] == want
    assert store.misses == misses and store.hits == 0   # none looked up
    counter.flush()
    again = reopened("o200k_base")
    assert [again.exact_text(t) for t in shorts] == want
    assert again._enc is None and again._store.hits == 40


def test_texts_no_run_counted_are_counted_not_looked_up_but_kept_counts_are_found_again(cache):
    """A session opened for the first time misses every lookup (~20 µs each: 0.25 s of a first open at
    20,000 messages): after MISSED_IN_A_ROW misses texts are counted without one, but for one in
    PROBE_EVERY, which finds a run of counts another run kept, and lookups start again."""
    new = [f"new text {i} " * 40 for i in range(400)]
    kept = [f"kept text {i} " * 40 for i in range(400)]
    want = TokenCounter("o200k_base", store=False)
    first = reopened("o200k_base")
    assert [first.exact_text(t) for t in kept] == [want.exact_text(t) for t in kept]
    first.flush()
    counter = reopened("o200k_base")
    assert [counter.exact_text(t) for t in new] == [want.exact_text(t) for t in new]
    store = counter._store
    assert store.misses <= tokens.MISSED_IN_A_ROW + len(new) // tokens.PROBE_EVERY + 1, store.misses
    tokenized = counter.tokenized_chars
    assert [counter.exact_text(t) for t in kept] == [want.exact_text(t) for t in kept]
    assert store.hits >= len(kept) - tokens.PROBE_EVERY   # found again from the first probe on
    assert counter.tokenized_chars - tokenized <= tokens.PROBE_EVERY * len(kept[0])
    counter.flush()
    again = reopened("o200k_base")
    assert [again.exact_text(t) for t in new] == [want.exact_text(t) for t in new]   # every count was stored
    assert again._enc is None


def test_a_form_counted_for_the_sums_is_not_kept_alive_by_the_counter(monkeypatch):
    """A stage's form of a message is a text made for one count: its count is kept in the index's sums,
    the text itself in no cache of the counter (the 20k session kept ~13 MB of forms alive there; its
    peak went 112 -> 104 MB). The message texts, which the log holds anyway, are still cached."""
    import weakref

    from synth import as_log, session_messages

    from breakwater.core.fold.index import Index
    from breakwater.core.policy import preset
    from breakwater.core.simulate import simulate

    counters = []
    transform = Index.transform
    made: list[weakref.ref] = []

    class Text(str):   # a str that a weak reference can follow
        pass

    def traced(self, i, level, near):
        res = transform(self, i, level, near)
        if res is None:
            return None
        form = res[0].with_content(Text(res[0].content))
        made.append(weakref.ref(form.content))
        counters.append(self.counter)
        return (form,) + tuple(res[1:])

    monkeypatch.setattr(Index, "transform", traced)
    sim = simulate(as_log(session_messages(600, avg_tool_chars=3000, seed=5), window=32_000),
                   preset("breakwater").with_changes(window=32_000), counter="exact")
    assert sum(t.counted == "exact" for t in sim.turns) > 50 and made
    cached = set(map(id, counters[0]._cache))
    assert not [r for r in made if r() is not None and id(r()) in cached]
    assert len(counters[0]._cache) > 100
