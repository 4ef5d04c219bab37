"""The proven lower bound on tiktoken's count (core/log/tokens.py `lower_text`) and what it spares the
exact counter: a request past the window is known to be so without tiktoken (issue 29 item 1)."""

import random
from pathlib import Path

import pytest
from synth import as_log, session_messages

from breakwater.core.fold import index, meter
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.log.tokens import (TokenCounter, get_encoding, heuristic_message, heuristic_text,
                                        lower_message, lower_text)
from breakwater.core.policy import PRESETS
from breakwater.core.simulate import simulate
from breakwater.formats import load_session

ROOT = Path(__file__).resolve().parents[1]
REAL = Path("/work/shared/fixtures/real")


def _texts() -> list[str]:
    texts = []
    for path in sorted(ROOT.glob("sample_sessions/*.jsonl")) + sorted(p for p in REAL.glob("*/*") if p.is_file()
                                                                       and p.suffix != ".md"):
        for m in load_session(path).messages:
            texts += [m.content, *(c.arguments for c in m.tool_calls)]
    rnd = random.Random(29)
    # whitespace tiktoken and Python disagree on (\x1c-\x1f, \x85, \xa0, U+2028, U+3000), the "\n/" that
    # o200k's punctuation piece runs on into, runs of digits and of spaces, surrogates
    alphabet = [" ", "\t", "\n", "\r", "\x0b", "\x0c", "/", ".", "\n/", ".\n/", "'s", "a", "Z", "0", "123456",
                "_", "(", "\u00a0", "\x85", "\u2028", "\u3000", "\x1c", "\x1f", "中", "é", "😀", "\ud800", " " * 9]
    texts += ["".join(rnd.choice(alphabet) for _ in range(rnd.randrange(1, 60))) for _ in range(5000)]
    texts += [".\n/", ".\n/\n/", "a.\r\n/b", "x" * 5000, " ".join("ab" for _ in range(3000))]
    return [t for t in texts if t]


def test_the_lower_bound_counts_the_runs_bytes_split_cuts():
    """`lower_text` counts runs of non-whitespace by marking bytes, not by splitting: the same count as
    bytes.split() (ASCII whitespace only), less one per newline before "/", at least one."""
    rnd = random.Random(7)
    raw = [bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 40))) for _ in range(3000)]
    for t in _texts() + [b.decode("latin-1") for b in raw] + ["x" * 20_000 + " y", " \t" * 9000]:
        data = t.encode("utf-8", "surrogatepass")
        expected = max(len(data.split()) - data.count(b"\n/") - data.count(b"\r/"), 1)
        assert lower_text(t) == expected, t[:60]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_the_lower_bound_is_never_above_tiktokens_count(encoding):
    enc = get_encoding(encoding)
    over = [(t[:60], lower_text(t), len(enc.encode_ordinary(t))) for t in _texts()
            if lower_text(t) > len(enc.encode_ordinary(t))]
    assert over == []
    # what `_measure` and `Pipeline.count` rely on to skip working the bound out
    assert [t[:60] for t in _texts() if lower_text(t) > 2 * heuristic_text(t)] == []


def test_a_messages_bound_is_below_its_exact_count_and_at_most_twice_its_heuristic():
    counter = TokenCounter("o200k_base")
    msgs = [Message("a", "assistant", "run it.\n/tmp", (ToolCall("c1", "bash", '{"command": "ls -la /"}'),),
                    meta={"reasoning": "the files first", "reasoning_resent": True}),
            Message("t", "tool", "a b c d e f g h i j k l", tool_call_id="c1"),
            Message("u", "user", "x y\u00a0z 中 é"), Message("e", "user", "")]
    for m in msgs:
        assert lower_message(m) <= counter.exact_message(m)
        assert lower_message(m) <= 2 * heuristic_message(m)


def _run(messages):
    log = as_log(messages)
    counter = TokenCounter("o200k_base")
    sim = simulate(log, PRESETS["breakwater"].with_changes(window=32000), "exact", tokens=counter)
    return sim, counter.exact_encoded_chars


def test_a_history_past_the_window_is_not_encoded_and_no_verdict_changes(monkeypatch, tmp_path):
    """The bench session's shape (tool results of ~15k characters, a 32k window, few compactions): the
    history from the cut runs to hundreds of thousands of tokens, and tiktoken encoded all of it, more
    than the whole log, to find it past the hard limit. With the bound it encodes a fraction, and every
    plan is the one the exact count gave: only the zone's figure of a request past the window is the
    estimate, raised to the bound, and says so."""
    msgs = session_messages(700, avg_tool_chars=15000, seed=42)
    log_chars = sum(len(m.content) for m in msgs)
    sim, encoded = _run(msgs)
    with monkeypatch.context() as mp:   # no bound ever tells: every request near or past a limit is counted
        # in a store of its own: the first run's plans kept their bounds (core/fold/kept_measures.py), which
        # a run whose code changed (here, patched) must not find
        mp.setenv("BREAKWATER_CACHE_DIR", str(tmp_path))
        mp.setattr(index, "lower_message", lambda m: 0)
        mp.setattr(meter, "lower_message", lambda m: 0)
        full, encoded_full = _run(msgs)
    assert encoded_full > log_chars   # what it cost: the whole log and more
    assert encoded < encoded_full / 3
    bounded = 0
    for a, b in zip(full.turns, sim.turns):
        assert (a.turn, a.sent_tokens, a.counted, a.zone, a.fits, a.level, a.edits, a.raw_tokens,
                a.stable_prefix_tokens, a.compaction) == \
               (b.turn, b.sent_tokens, b.counted, b.zone, b.fits, b.level, b.edits, b.raw_tokens,
                b.stable_prefix_tokens, b.compaction)
        if (a.base_tokens, a.zone_counted) != (b.base_tokens, b.zone_counted):
            bounded += 1
            assert a.zone_counted == "exact" and b.zone_counted == "estimate"
            assert a.base_tokens > 32000 and b.base_tokens > 32000
    assert bounded > len(sim.turns) // 2


def test_a_session_never_near_a_limit_loads_no_tokenizer():
    """Loading tiktoken's encoding is ~0.3 s and ~70 MB of a command; it was loaded before every
    simulation with the exact counter, whether or not a request came near a limit."""
    counter = TokenCounter("o200k_base")
    sim = simulate(as_log(session_messages(40, avg_tool_chars=200, seed=3), window=128000),
                   PRESETS["breakwater"].with_changes(window=128000), "exact", tokens=counter)
    assert sim.turns and all(t.counted == "estimate" for t in sim.turns)
    assert counter._enc is None and counter.exact_encoded_chars == 0
