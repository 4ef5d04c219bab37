"""The command-line contract of SPEC §11 for simulate, tokens and the default command."""

import json
import subprocess
import sys

import pytest

from breakwater import __version__
from breakwater.cli.core import sample_path
from synth import session_messages, write_session


def run(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    path = tmp_path_factory.mktemp("s") / "s.jsonl"
    return write_session(path, session_messages(300, avg_tool_chars=3000, seed=8), header={"window": 16_000})


def test_version():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"breakwater {__version__}"


def test_simulate_json_contract(session):
    out = run("simulate", str(session), "--json", "--counter", "heuristic")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert {"window", "soft_limit", "hard_limit", "preset", "counter", "turns", "totals"} <= set(data)
    assert (data["window"], data["soft_limit"], data["hard_limit"]) == (16_000, 11_200, 13_600)
    assert data["preset"] == "breakwater" and data["counter"] == "heuristic"
    for t in data["turns"]:
        assert {"turn", "raw_tokens", "sent_tokens", "zone", "edits"} <= set(t)
        assert t["zone"] in ("safe", "soft", "hard") and isinstance(t["edits"], dict)
        assert t["sent_tokens"] <= 16_000
    assert [t["turn"] for t in data["turns"]] == list(range(1, len(data["turns"]) + 1))
    totals = data["totals"]
    assert totals["billed_raw"] == sum(t["raw_tokens"] for t in data["turns"])
    assert totals["billed_sent"] == sum(t["sent_tokens"] for t in data["turns"])
    assert totals["billed_sent"] < totals["billed_raw"] and "compactions" in totals


def test_simulate_view_contract(session):
    out = run("simulate", str(session), "--view", "60", "--preset", "seed-001", "--counter", "heuristic")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["turn"] == 60
    assert data["messages"][0]["role"] == "system"
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id"} for m in data["messages"])
    for e in data["edits"]:
        assert {"message_id", "stage", "kind", "tokens_before", "tokens_after"} <= set(e)
    sim = json.loads(run("simulate", str(session), "--json", "--preset", "seed-001", "--counter", "heuristic").stdout)
    assert sim["turns"][59]["sent_tokens"] == data["sent_tokens"]


def test_simulate_window_and_policy_file(session, tmp_path):
    pol = tmp_path / "p.toml"
    pol.write_text('preset = "seed-000"\nwindow = 8000\n')
    data = json.loads(run("simulate", str(session), "--json", "--policy", str(pol), "--counter", "heuristic").stdout)
    assert data["preset"] == "seed-000" and data["window"] == 8000
    data = json.loads(run("simulate", str(session), "--json", "--window", "64000", "--counter", "heuristic").stdout)
    assert data["window"] == 64000
    bad = tmp_path / "bad.toml"
    bad.write_text("window = [")
    out = run("simulate", str(session), "--policy", str(bad))
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1


def test_human_table(session):
    out = run("simulate", str(session), "--counter", "heuristic")
    assert out.returncode == 0
    assert "soft 11,200" in out.stdout and "billed without compaction" in out.stdout


@pytest.mark.parametrize("counter", ["heuristic", "exact"])
def test_the_billed_with_figure_says_when_it_is_an_estimate(session, counter):
    data = json.loads(run("simulate", str(session), "--json", "--counter", counter).stdout)
    estimated = any(t["counted"] != "exact" for t in data["turns"])
    assert data["totals"]["billed_sent_estimated"] is estimated
    assert estimated or counter == "exact"
    line = run("simulate", str(session), "--counter", counter).stdout.replace("\n", " ")
    # was "with 1,234" beside per-turn figures marked ≈
    assert f"· with {'≈' if estimated else ''}{data['totals']['billed_sent']:,} ·" in line


def test_tokens_json(session):
    out = run("tokens", str(session), "--json")
    data = json.loads(out.stdout)
    assert data["encoding"] == "o200k_base" and data["exact"] > 0 and data["heuristic"] > 0
    out = run("tokens", str(session), "--json", "--model", "claude-sonnet-4")
    data = json.loads(out.stdout)
    assert data["exact"] is None and data["encoding"] is None


def test_simulate_replays_an_agent_recording_under_its_recorded_policy(tmp_path):
    from breakwater.core.policy import preset as get_preset
    custom = get_preset("seed-001").with_changes(window=12_000, working_memory_messages=4)
    path = write_session(tmp_path / "rec.jsonl", session_messages(120, avg_tool_chars=2000, seed=3),
                         header={"window": 12_000, "preset": "seed-001", "policy": custom.to_dict()})
    data = json.loads(run("simulate", str(path), "--json", "--counter", "heuristic").stdout)
    assert (data["preset"], data["window"]) == ("seed-001", 12_000)
    view = json.loads(run("simulate", str(path), "--view", "40", "--counter", "heuristic").stdout)
    assert view["sent_tokens"] == data["turns"][39]["sent_tokens"]
    other = json.loads(run("simulate", str(path), "--json", "--preset", "seed-000", "--counter", "heuristic").stdout)
    assert other["preset"] == "seed-000" and other["window"] == 12_000
