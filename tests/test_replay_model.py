"""core.replay: the workbench's model of a session gives exactly what `simulate` gives, at every
turn it is asked, from its checkpoints."""

from __future__ import annotations

import random

import pytest
from synth import as_log, session_messages

from breakwater.core import replay as replay_module
from breakwater.cli.core import read_session, sample_path
from breakwater.core.policy import preset
from breakwater.core.replay import CHECKPOINTS, STEPPING_STONES, TRAILING_VIEWS, Replay
from breakwater.core.simulate import simulate, view_at


@pytest.fixture(scope="module")
def long_refactor():
    log = read_session(sample_path("long-refactor.jsonl"))
    replay = Replay(log, preset("breakwater").with_changes(window=log.header["window"]))
    replay.run()
    return replay


def test_simulation_is_simulates(long_refactor):
    r = long_refactor
    assert r.simulation.to_json() == simulate(r.log, r.policy).to_json()
    assert r.turns == r.log.turn_count() > 100


def test_views_equal_view_at_in_any_order(long_refactor):
    r = long_refactor
    rng = random.Random(7)
    turns = [1, 2, r.turns, r.turns + 1] + [rng.randrange(1, r.turns + 1) for _ in range(12)]
    for turn in turns:
        assert r.view(turn) == view_at(r.log, r.policy, turn), turn


def test_detail_groups_the_summary_and_counts(long_refactor):
    r = long_refactor
    d = r.detail(r.turns)
    assert d.summary is not None and d.summary.covered
    assert d.summary.message.meta["compaction"] == d.summary.compaction.id
    assert all("summarized" in d.kinds(mid) for mid in d.summary.covered)
    assert d.exact_tokens is not None and d.encoding == "o200k_base"
    assert d.heuristic_tokens > 0
    stats = r.stats(r.turns)
    assert (d.view.raw_tokens, d.view.sent_tokens, d.view.zone) == (stats.raw_tokens, stats.sent_tokens, stats.zone)
    assert d.view.edit_counts() == stats.edits
    # the history of the last request is everything before the last assistant message
    last = max(i for i, m in enumerate(r.log.messages) if m.role == "assistant")
    assert d.history == last


def test_checkpoints_are_bounded_and_jumps_cheap():
    log = as_log(session_messages(3000, avg_tool_chars=1500), window=64000)
    r = Replay(log, preset("breakwater").with_changes(window=64000))
    r.run()
    assert 1 < len(r._checkpoints) <= CHECKPOINTS
    for turn in (r.turns, r.turns // 2, 3):
        assert r.view(turn) == view_at(log, r.policy, turn)


def test_with_policy_replays_the_same_log_under_another():
    log = read_session(sample_path("npm-install-flood.jsonl"))
    a = Replay(log, preset("seed-001"))
    b = a.with_policy(preset("seed-000"))
    a.run(), b.run()
    assert b.log is a.log and b.policy.preset == "seed-000"
    assert b.simulation.to_json()["preset"] == "seed-000"


def test_stepping_forward_and_back_gives_the_same_views():
    log = as_log(session_messages(1500, avg_tool_chars=3000, seed=4), window=24000)
    policy = preset("breakwater").with_changes(window=24000)
    r = Replay(log, policy)
    r.run()
    walk = [40, 41, 42, 50, 49, 30, 31, r.turns, r.turns + 1, 1, 2]
    for turn in walk:
        if turn == 50:
            r._views.clear()   # a step forward that must carry on with the live pipeline
        assert r.view(turn) == view_at(log, policy, turn), turn
    assert r.history_size(1) == 2 and r.history_size(r.turns + 1) == len(log.messages)


def test_a_threshold_change_does_not_count_unchanged_messages_again(monkeypatch, tmp_path):
    # stores of their own: a run finds the exact figures of the plans another run with the same policy
    # made (core/fold/kept_measures.py), and the fresh run must count what it needs
    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(tmp_path / "a"))
    log = as_log(session_messages(600, avg_tool_chars=3000, seed=8), window=24000)
    a = Replay(log, preset("breakwater").with_changes(window=24000))
    a.run()
    first, known = a.tokens.exact_encoded_chars, set(a.tokens._cache)
    b = a.with_policy(a.policy.with_changes(window=23000))
    b.run()
    b.detail(b.turns // 2)   # a jump folds from a checkpoint with the same counter
    assert b.tokens is a.tokens and first > 0
    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(tmp_path / "fresh"))
    fresh = Replay(log, b.policy)
    fresh.run()
    fresh.detail(b.turns // 2)
    # b encodes exactly what a fresh run encodes, less every text a had counted already
    again = sum(len(t) for t in fresh.tokens._cache if t in known)
    assert again > first / 2
    assert b.tokens.exact_encoded_chars - first == fresh.tokens.exact_encoded_chars - again
    assert b.view(b.turns // 2) == view_at(log, b.policy, b.turns // 2)


def test_the_turn_on_screen_is_built_in_the_pass_and_steps_back_from_it_are_ready():
    log = as_log(session_messages(1500, avg_tool_chars=3000, seed=4), window=24000)
    policy = preset("breakwater").with_changes(window=24000)
    r = Replay(log, policy)
    focus = r.log.turn_count() - 20
    r.run(focus=focus)
    assert focus in r._views and len(r._near) == TRAILING_VIEWS
    # back through the prepared turns, on past them (a fold that prepares the next steps back),
    # a jump, a step back from it, forward again, the next request
    walk = [focus, *range(focus - 1, focus - 2 * TRAILING_VIEWS - 3, -1), 60, 59, 58, 61, 62, r.turns + 1, 1, 2]
    for turn in walk:
        assert r.view(turn) == view_at(log, policy, turn), turn
    d = r.detail(58)
    assert r.detail(58) is d   # a step back and forth draws what was worked out once


def test_stepping_back_far_folds_from_a_checkpoint_once_in_a_while(monkeypatch):
    """A step back past the prepared views folds from a checkpoint and keeps the pipeline where the
    next few such folds start; each request is still exactly `view_at`'s."""
    monkeypatch.setattr(replay_module, "CHECKPOINTS", 8)   # far apart, as in a long session
    log = as_log(session_messages(3000, avg_tool_chars=1500, seed=6), window=64000)
    policy = preset("breakwater").with_changes(window=64000)
    r = Replay(log, policy)
    r.run()
    k = TRAILING_VIEWS
    target = r._checkpoints[-1].turn - 1
    r.view(target + 1)
    r.view(target)   # a step back: a fold from the checkpoint before
    stones = {target - j * (k + 1) - k for j in range(1, STEPPING_STONES + 1)}
    assert r._checkpoints[-2].turn < min(stones) and set(r._near) == stones
    for turn in range(target - 1, target - (STEPPING_STONES + 1) * (k + 1), -1):
        assert r.view(turn) == view_at(log, policy, turn), turn
        assert set(r._near) == {s for s in stones if s < turn - k}   # each used once, by the fold it is for
    turn = target - (STEPPING_STONES + 1) * (k + 1)   # past the last one: from the checkpoint again
    assert r.view(turn) == view_at(log, policy, turn)
    assert set(r._near) == {turn - j * (k + 1) - k for j in range(1, STEPPING_STONES + 1)}


@pytest.mark.parametrize(("name", "policy_name"), [
    *(("long-refactor.jsonl", p) for p in ("breakwater", "seed-000", "seed-001", "seed-003")),
    ("sanitizer-mess.jsonl", "breakwater"), ("mixed-zh-en.jsonl", "seed-003")])
def test_detail_finds_each_messages_edits_as_the_request_lists_them(name, policy_name):
    """The summarized and dropped messages are looked up in ranges, never grouped one by one:
    what the list and the inspector read must still be each message's edits in the request's order."""
    log = read_session(sample_path(name))
    r = Replay(log, preset(policy_name).with_changes(window=log.header["window"]))
    r.run()
    seen_range = False
    for turn in range(1, r.turns + 2):
        d = r.detail(turn)
        grouped: dict[str, list] = {}
        for e in d.view.edits:
            grouped.setdefault(e.message_id, []).append(e)
        assert list(d.edits_by_id) == list(grouped) and len(d.edits_by_id) == len(grouped)
        for m in log.messages:
            assert d.edits_by_id.get(m.id) == grouped.get(m.id), (turn, m.id)
            assert (m.id in d.edits_by_id) == (m.id in grouped)
        summarized = tuple(dict.fromkeys(e.message_id for e in d.view.edits if e.kind == "summarized"))
        if d.summary is not None:
            assert d.summary.covered == summarized
            assert [m.id for m in log.messages if d.summary.covers(m.id)] == \
                [m.id for m in log.messages if m.id in summarized]
        seen_range = seen_range or any(e.kind in ("summarized", "dropped") for e in d.view.edits)
    assert seen_range   # long-refactor summarizes (seed-001: drops), the other two summarize or drop
