"""The exact figures of a plan's requests kept between runs (issue 38, core/fold/kept_measures.py): a
reopened session finds them and sums nothing exactly; any change of what they were worked out from
(a message, the policy, a pin, the store's bytes) finds none, or not the changed ones, and the figures
are the same as working them all out."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from synth import as_log, session_messages, write_session

from breakwater.core.fold import kept_measures
from breakwater.core.fold.index import Index
from breakwater.core.log import count_store
from breakwater.core.policy import preset
from breakwater.core.simulate import simulate

WINDOW = 32_000


@pytest.fixture
def store_dir(tmp_path, monkeypatch):
    """A count store of the test's own (the suite's is shared by every test)."""
    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def sums(monkeypatch):
    """How many exact and lower-bound sums the index works out."""
    asked = {"exact": 0, "lower": 0}
    exact_sum, lower_sum = Index.exact_sum, Index.lower_sum

    def exact(self, *args):
        asked["exact"] += 1
        return exact_sum(self, *args)

    def lower(self, *args):
        asked["lower"] += 1
        return lower_sum(self, *args)

    monkeypatch.setattr(Index, "exact_sum", exact)
    monkeypatch.setattr(Index, "lower_sum", lower)
    return asked


def _turns(msgs, window: int = WINDOW, **changes):
    policy = preset("breakwater").with_changes(window=window, **changes)
    turns = simulate(as_log(msgs, window=window), policy, counter="exact").turns
    count_store.flush_all()
    return [t.json_text() for t in turns]


def _msgs(n: int = 600, seed: int = 3):
    return session_messages(n, avg_tool_chars=3000, seed=seed)


def test_a_reopen_finds_every_exact_figure_kept_and_sums_none(store_dir, sums):
    first = _turns(_msgs())
    assert sums["exact"] > 300, sums   # the session is near its limits: counted exactly
    sums["exact"] = sums["lower"] = 0
    assert _turns(_msgs()) == first
    assert sums == {"exact": 0, "lower": 0}


def test_a_message_changed_finds_the_figures_before_it_and_works_out_those_after(store_dir, sums, monkeypatch):
    msgs = _msgs()
    _turns(msgs)
    k = len(msgs) * 2 // 3
    changed = msgs[:k] + [replace(msgs[k], content=msgs[k].content + " (edited)")] + msgs[k + 1:]
    sums["exact"] = 0
    got = _turns(changed)
    assert 0 < sums["exact"]
    worked_out = sums["exact"]
    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(store_dir.parent / "empty"))
    sums["exact"] = 0
    assert got == _turns(changed)   # the same figures as a run that kept nothing
    assert sums["exact"] > 2 * worked_out


def test_another_policy_or_a_pin_finds_none_of_them(store_dir, sums):
    msgs = _msgs()
    _turns(msgs)
    sums["exact"] = 0
    _turns(msgs, snip_head_chars=1_400)
    assert sums["exact"] > 300   # another policy: worked out again
    key = kept_measures.code_key()
    assert key is not None and len(key) == 16


def test_a_damaged_record_is_not_trusted(store_dir, sums):
    msgs = _msgs()
    first = _turns(msgs)
    path = store_dir / "counts.sqlite3"
    count_store._stores.clear()   # the next run opens the file afresh
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] > 0
        conn.execute("UPDATE records SET v = substr(v, 1, 40) || zeroblob(8) || substr(v, 49)")
    sums["exact"] = 0
    assert _turns(msgs) == first
    assert sums["exact"] > 0   # found damaged: worked out again
    assert list(store_dir.glob("counts.sqlite3*.damaged"))


def test_records_are_bounded(store_dir, monkeypatch):
    monkeypatch.setenv("BREAKWATER_COUNT_CACHE_RECORDS", "16")
    monkeypatch.setattr(kept_measures, "BATCH_PLANS", 1)   # a record a plan: many records
    for seed in (1, 2, 3):
        _turns(_msgs(400, seed))
    with sqlite3.connect(store_dir / "counts.sqlite3") as conn:
        assert 0 < conn.execute("SELECT count(*) FROM records").fetchone()[0] <= 16


def test_turned_off_keeps_nothing_and_counts_the_same(store_dir, sums, monkeypatch):
    msgs = _msgs()
    first = _turns(msgs)
    monkeypatch.setenv("BREAKWATER_COUNT_CACHE", "off")
    sums["exact"] = 0
    assert _turns(msgs) == first
    assert sums["exact"] > 300


def test_a_reopen_in_another_process_prints_the_same_and_keeps_records(tmp_path):
    """Real processes: the first fills the store, the second reads it; both print what a run with no
    store prints."""
    path = write_session(tmp_path / "s.jsonl", _msgs(), header={"window": WINDOW})
    outs = []
    for cache, env_extra in (("a", {}), ("a", {}), ("b", {"BREAKWATER_COUNT_CACHE": "off"})):
        env = {"BREAKWATER_CACHE_DIR": str(tmp_path / cache), "PATH": "/usr/bin:/bin", **env_extra}
        proc = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json"],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1] == outs[2]
    with sqlite3.connect(Path(tmp_path / "a" / "counts.sqlite3")) as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] > 0


def test_figures_worked_out_after_a_write_of_their_record_are_written_too(store_dir, sums, monkeypatch):
    """The store writes when it holds enough (here: at every count put), in the middle of a plan: a record
    put before a write is put again at its next figure, so that the last plan's figures are all kept."""
    monkeypatch.setattr(count_store, "FLUSH_ROWS", 1)
    first = _turns(_msgs())
    count_store._stores.clear()
    sums["exact"] = sums["lower"] = 0
    assert _turns(_msgs()) == first
    assert sums == {"exact": 0, "lower": 0}


def test_a_chat_of_short_messages_keeps_nothing(store_dir, sums):
    """Summing short messages is cheap; a record a plan was not (200,000 tiny messages: 1.3 s more on a
    first open). Such a session keeps no figures, and counts the same."""
    from breakwater.core.log.message import Message

    chat = [Message(id=f"m{i}", role="user" if i % 2 == 0 else "assistant", content=f"msg {i} " * 8)
            for i in range(3000)]
    first = _turns(chat, window=4_000)
    assert sums["exact"] > 300
    with sqlite3.connect(store_dir / "counts.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM records").fetchone()[0] == 0
    assert _turns(chat, window=4_000) == first
