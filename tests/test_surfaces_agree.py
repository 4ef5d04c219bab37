"""Every surface shows the same numbers (issue 23): on every real transcript under every preset, what
the workbench hands its widgets (the replay's simulation for the timeline, each turn's view for the
gauges) is what `breakwater simulate --json` prints at every turn, and `eval`'s totals are
simulate's. The CLI runs as a real subprocess; the workbench's figures come from the same Replay
the screen draws from."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from support.transcripts import REAL

from breakwater.cli.core import read_session, resolve_policy
from breakwater.core.policy import PRESETS
from breakwater.core.replay import Replay
from breakwater.fidelity.runner import evaluate_path

FIXTURES = sorted(p for p in REAL.glob("*/*") if p.name != "SOURCES.md")
FIELDS = ("raw_tokens", "sent_tokens", "zone", "fits", "stable_prefix_tokens")


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name[:30]}")
def test_workbench_eval_and_simulate_agree(path):
    evaluated = evaluate_path(str(path), list(PRESETS))
    assert evaluated.error is None, evaluated.error
    log = read_session(path)
    for name in PRESETS:
        out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json", "--preset", name],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        cli = json.loads(out.stdout)
        ns = argparse.Namespace(policy=None, preset=name, window=None, model=None)
        policy = resolve_policy(ns, log)
        replay = Replay(log, policy, "exact", window_source=ns.window_source)
        sim = replay.run()
        assert sim.to_json()["turns"] == cli["turns"], name            # the timeline's figures
        assert sim.totals_json() == cli["totals"], name
        assert (policy.window, ns.window_source) == (cli["window"], cli["window_source"])
        for row in cli["turns"]:                                         # the gauges' figures
            view = replay.detail(row["turn"]).view
            assert {f: getattr(view, f) for f in FIELDS} == {f: row[f] for f in FIELDS}, (name, row["turn"])
        summary = evaluated.presets[name]                                # eval's totals
        assert (summary.billed_raw, summary.billed_sent, summary.sent_estimated) == (
            cli["totals"]["billed_raw"], cli["totals"]["billed_sent"], cli["totals"]["billed_sent_estimated"]), name
