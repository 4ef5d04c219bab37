"""Deep compaction under every preset: nothing leaves the context without a summary, turns alternate,
single-prompt agent runs compact too (issue 7 items 1, 2, 4)."""

import json

import pytest

from breakwater.cli.core import sample_path
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.policy import PRESETS, preset
from breakwater.core.log.session_log import SessionLog
from breakwater.core.simulate import simulate, view_at
from breakwater.core.log.validity import api_problems
from breakwater.formats import load_session


def uncovered(view, log_messages):
    """Log messages that are neither sent nor accounted for by a summary or a sanitizer edit."""
    present = set()
    for m in view.messages:
        present.add(m.id)
        present.update((m.meta or {}).get("joined", ()))
    accounted = {e.message_id for e in view.edits
                 if e.kind in ("summarized", "merged", "stripped") or (e.kind == "dropped" and e.stage == "sanitize")}
    return [m.id for m in log_messages if m.id not in present and m.id not in accounted]


def single_prompt_run(turns=200, size=2_500):
    msgs = [Message("m0", "system", "You are a coding agent."),
            Message("m1", "user", "Find why the pool times out in app/db/pool.py and fix it.")]
    for i in range(turns):
        call = ToolCall(f"call_{i}", "read_file", json.dumps({"path": f"src/mod{i}.py"}))
        msgs.append(Message(f"a{i}", "assistant", f"Reading module {i}.", (call,)))
        msgs.append(Message(f"t{i}", "tool", f"# src/mod{i}.py\n" + "def f():\n    return 1\n" * (size // 24),
                            tool_call_id=call.id))
    return msgs


def test_seed_003_view_covers_every_message_that_left():
    log = load_session(sample_path("npm-install-flood.jsonl"))
    view = view_at(log, preset("seed-003").with_changes(window=log.header.get("window") or 128_000), 19,
                   counter="heuristic")
    assert not [e for e in view.edits if e.kind == "dropped" and e.stage == "shape_history"]
    before = [e for e in log.entries if isinstance(e, Message)]
    upto = []
    for m in before:
        if m.role == "assistant" and sum(1 for x in upto if x.role == "assistant") == 18:
            break
        upto.append(m)
    assert uncovered(view, upto) == []
    assert api_problems(view.to_api()) == []


@pytest.mark.parametrize("name", ["breakwater", "seed-000", "seed-003"])
def test_a_single_prompt_agent_run_is_summarized_not_dropped(name):
    msgs = single_prompt_run()
    policy = preset(name).with_changes(window=8_000)
    sim = simulate(SessionLog(header={}, entries=msgs), policy, counter="heuristic")
    assert sim.compactions, name
    assert not any(t.edits.get("dropped") for t in sim.turns), name
    pipe = Pipeline(policy)
    for m in msgs:
        if m.role == "assistant":
            view = pipe.view()[0]
            seen = msgs[: msgs.index(m)]
            assert uncovered(view, seen) == [], (name, m.id)
            assert api_problems(view.to_api()) == [], (name, m.id)
        pipe.feed(m)


def test_seed_001_is_a_sliding_window_and_says_so():
    from breakwater.core.policy import PRESET_DESCRIPTIONS

    assert "without a summary" in PRESET_DESCRIPTIONS["seed-001"]
    assert set(PRESET_DESCRIPTIONS) == set(PRESETS)
    sim = simulate(SessionLog(header={}, entries=single_prompt_run()), preset("seed-001").with_changes(window=8_000),
                   counter="heuristic")
    assert not sim.compactions and any(t.edits.get("dropped") for t in sim.turns)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_view_of_long_refactor_alternates(name):
    log = load_session(sample_path("long-refactor.jsonl"))
    policy = preset(name).with_changes(window=log.header.get("window") or 128_000)
    pipe = Pipeline(policy)
    bad = 0
    for e in log.entries:
        if isinstance(e, Message) and e.role == "assistant":
            bad += bool(api_problems(pipe.view()[0].to_api()))
        pipe.feed(e)
    assert bad == 0


def test_api_problems_flags_two_user_messages_in_a_row():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert api_problems(msgs) == ["#2: two user messages in a row"]
