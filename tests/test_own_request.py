"""The usage figures of another agent's transcript are paired with the count of the request that agent
sent (its history, sanitized, its recorded compactions applied), worked out by the pipeline that
replays the log in the same pass (core/fold/own_request.py), not by a second pipeline on import (issue 28)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from breakwater.core.fold.pipeline import RECORDED, Pipeline
from breakwater.core.log.message import Message
from breakwater.core.log.session_log import Event, SessionLog
from breakwater.core.log.tokens import TokenCounter
from breakwater.core.policy import PRESETS
from breakwater.core.fold.own_request import own_history_policy
from breakwater.core.simulate import JsonWriter, simulate
from breakwater.formats import load_session
from synth import session_messages

REAL = Path(__file__).parent / "fixtures" / "real"


def with_own_estimates(log: SessionLog) -> SessionLog:
    """The log with each usage event's estimate set as a separate pass over it counts them (what the
    importer did before): a pipeline that compacts nothing of its own, planned at every request."""
    pipe = Pipeline(own_history_policy(), TokenCounter(None), mode="heuristic")
    counted: dict[int, int] = {}
    entries = []
    for entry in log.entries:
        if isinstance(entry, Message):
            if entry.role == "assistant":
                plan = pipe.plan()
                counted[plan.turn] = plan.sent_heuristic
        elif entry.type == "usage" and counted.get(entry.get("turn")):
            entry = Event("usage", entry.id, {**entry.data, "estimate": counted[entry.get("turn")]})
        entries.append(entry)
        pipe.feed(entry)
    return SessionLog(dict(log.header), entries)


def simulated(log: SessionLog, policy) -> str:
    out = io.StringIO()
    writer = JsonWriter(out)
    writer.finish(simulate(log, policy, "heuristic", on_turn=writer.turn))
    return out.getvalue()


def imported_like() -> SessionLog:
    """A transcript as an importer makes it: usage after each reply without an estimate, and the
    agent's own compactions (recorded) at turns where ours happen too under a small window."""
    msgs = session_messages(240, avg_tool_chars=3000, seed=5)
    entries: list = []
    assistants = 0
    for i, m in enumerate(msgs):
        if i in (60, 150, 151):   # two in a row: the second cuts later than the first
            cut = msgs[i - 4 if i != 151 else i - 2]
            entries.append(Event("compaction", f"rec{i}", {"stage": "deep_compact", "trigger": RECORDED,
                                                            "summary": f"what happened before {cut.id}: " + "x" * 400,
                                                            "cut_id": cut.id, "turn": assistants + 1}))
        entries.append(m)
        if m.role == "assistant":
            assistants += 1
            entries.append(Event("usage", f"u{i}", {"prompt_tokens": 2000 + 37 * i, "turn": assistants}))
    return SessionLog({"model": "gpt-4o"}, entries)


@pytest.mark.parametrize("window", [8_000, 20_000, 1 << 20])
@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_usage_without_estimate_is_paired_as_a_separate_pass_over_the_agents_history_pairs_it(preset, window):
    log = imported_like()
    policy = PRESETS[preset].with_changes(window=window)
    ours = simulate(log, policy, "heuristic")
    assert ours.calibration.samples == log.turn_count()
    assert simulated(log, policy) == simulated(with_own_estimates(log), policy)


@pytest.mark.parametrize("path", [REAL / "pi" / "large-session.jsonl", REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl",
                                  REAL / "mini-swe-agent" / "pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json"],
                         ids=lambda p: p.parent.name)
def test_an_import_is_read_without_a_pipeline_and_simulates_as_with_its_estimates(path):
    log = load_session(path)
    usage = [e for e in log.events if e.type == "usage"]
    assert usage and not any("estimate" in e.data for e in usage)   # loading ran no pipeline
    for policy in (PRESETS["breakwater"], PRESETS["seed-000"].with_changes(window=32_000)):
        assert simulated(log, policy) == simulated(with_own_estimates(log), policy)


def test_the_logs_own_estimate_stands():
    log = imported_like()
    entries = [Event("usage", e.id, {**e.data, "estimate": 1000}) if isinstance(e, Event) and e.type == "usage" else e
               for e in log.entries]
    sim = simulate(SessionLog(dict(log.header), entries), PRESETS["breakwater"], "heuristic")
    assert sim.calibration.samples == log.turn_count() and sim.calibration.last_estimate == 1000


def test_only_a_log_with_another_agents_usage_counts_the_agents_request():
    def counted(log) -> list:
        seen = []   # before each request is planned: what the previous plan counted of the agent's
        simulate(log, PRESETS["breakwater"].with_changes(window=8_000), "heuristic",
                 before_turn=lambda pipe, i: seen.append(pipe.own.counted))
        return seen[1:]

    log = imported_like()
    assert all(c is not None for c in counted(log))
    own = SessionLog(dict(log.header), [Event("usage", e.id, {**e.data, "estimate": 1000})
                                        if isinstance(e, Event) and e.type == "usage" else e for e in log.entries])
    bare = SessionLog(dict(log.header), [e for e in log.entries if not isinstance(e, Event) or e.type != "usage"])
    for skipped in (own, bare):   # nothing reads the count: a million-message log paid ~5% for it
        seen = counted(skipped)
        assert len(seen) > 1 and all(c is None for c in seen)


def test_a_replay_checkpoint_keeps_the_agents_own_compactions_apart():
    log = imported_like()
    policy = PRESETS["seed-000"].with_changes(window=8_000)
    pipe = Pipeline(policy, TokenCounter(None), mode="heuristic")
    copies = []
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            pipe.plan()
            copies.append(pipe.snapshot())
        pipe.feed(entry)
    assert any(c.own.chain for c in copies)
    whole = simulate(log, policy, "heuristic").calibration
    # one taken half way, fed the rest, fits as the pipeline that never stopped
    half = len(copies) // 2
    copy = copies[half]
    turns = 0
    for entry in log.entries:
        if isinstance(entry, Message) and entry.role == "assistant":
            turns += 1
            if turns > half + 1:
                copy.plan()
        if turns > half:
            copy.feed(entry)
    assert copy.calibration == whole
