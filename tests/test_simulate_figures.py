"""Honest figures (issue 7 items 9-11): one rule per figure, raw never shrinks, every request says
whether it fits, recorded compactions are counted beside decided ones."""

import json
import subprocess
import sys

from breakwater.cli.core import sample_path
from breakwater.core.log.message import Message
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.policy import preset
from breakwater.core.log.session_log import SessionLog
from breakwater.core.figures import FIGURE_RULES
from breakwater.core.simulate import simulate
from breakwater.formats import load_session
from synth import session_messages, write_session


def run(*args):
    return subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True, timeout=180)


def test_raw_and_sent_are_counted_alike_whatever_the_counter():
    """Raw (without compaction) is the sent request plus what the policy took out, counted by the same
    calibration (issue 23): saved = without − with exactly, by tiktoken or by the heuristic alike."""
    log = load_session(sample_path("long-refactor.jsonl"))  # usage events: the fit moves every turn
    policy = preset("breakwater").with_changes(window=32_000)
    for counter in ("exact", "heuristic"):
        sim = simulate(log, policy, counter=counter, model="gpt-4o")
        assert sim.saved == sim.billed_raw - sim.billed_sent > 0
        assert all(t.sent_tokens <= t.raw_tokens for t in sim.turns)
    # with no recorded usage the calibration stays put, and raw never shrinks
    plain = SessionLog(header={"window": 32_000}, entries=[e for e in log.entries if isinstance(e, Message)])
    raw = [t.raw_tokens for t in simulate(plain, policy, counter="heuristic").turns]
    assert all(b >= a for a, b in zip(raw, raw[1:]))


def test_every_turn_says_whether_it_fits_and_the_cli_warns(tmp_path):
    msgs = session_messages(40, avg_tool_chars=3000, seed=4)
    msgs[0] = Message(msgs[0].id, "system", "Rules of the house. " * 300)  # never cut: over 1,000 tokens alone
    path = write_session(tmp_path / "s.jsonl", msgs, header={"window": 1_000})
    out = run("simulate", str(path), "--json", "--window", "1000", "--preset", "seed-001")
    data = json.loads(out.stdout)
    over = [t for t in data["turns"] if not t["fits"]]
    assert over and all(t["sent_tokens"] > 1_000 for t in over)
    assert all(t["fits"] == (t["sent_tokens"] <= 1_000) for t in data["turns"])
    assert data["totals"]["over_window"] == len(over)
    warning = [line for line in out.stderr.splitlines() if "over the window" in line]
    assert len(warning) == 1 and f"turn {over[0]['turn']}" in warning[0]
    assert data["counting"] == FIGURE_RULES


def test_replaying_a_recording_counts_its_compactions_and_marks_their_turns():
    p = preset("breakwater").with_changes(window=16_000, deep_compact_first=True)
    live = Pipeline(p)
    log = SessionLog(header={"window": 16_000})
    decided = []
    for m in session_messages(240, avg_tool_chars=3000, seed=3):
        if m.role == "assistant":
            _, comp = live.view()
            if comp:
                log.append(comp.to_event())
                decided.append(comp.id)
        live.feed(m)
        log.append(m)
    assert decided
    sim = simulate(log, p, counter="heuristic")
    totals = sim.to_json()["totals"]
    assert totals["recorded_compactions"] == len(decided) and totals["decided_compactions"] == 0
    assert totals["compactions"] == len(decided)
    marked = [t for t in sim.turns if t.compaction]
    assert [t.compaction for t in marked] == decided and {t.compaction_source for t in marked} == {"recorded"}


def test_simulate_help_states_each_rule_and_the_default_counter():
    out = run("simulate", "--help").stdout
    for figure in ("raw_tokens", "sent_tokens", "stable_prefix_tokens", "billed_raw", "saved"):
        assert figure in out
    assert "gpt-4o" in out and "SPEC" not in out
