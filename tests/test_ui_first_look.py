"""The first screen does not wait for the exact pass (issue 28 item 4): the gauges draw the last
turn's request by the heuristic counter first, say so, and then the exact figures, which are what
`breakwater simulate --json` prints (a real subprocess, the real screen)."""

from __future__ import annotations

import json
import subprocess
import sys

from ui_support import app_for, ready, screen_text, until

from synth import session_messages, write_session
from breakwater.ui.widgets.gauges import Gauges
from breakwater.ui.widgets.replay_controls import ReplayControls


async def test_the_gauges_show_a_first_look_then_the_figures_simulate_prints(tmp_path):
    # long enough that the exact pass (tiktoken near the limits) outlasts a look at the screen
    path = write_session(tmp_path / "long.jsonl", session_messages(3000, avg_tool_chars=2000, seed=3),
                         header={"window": 32_000})
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json"],
                         capture_output=True, text=True, check=True, timeout=300)
    expected = json.loads(out.stdout)
    last = expected["turns"][-1]
    app = app_for(path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        gauges = screen.query_one(Gauges)
        await until(pilot, lambda: gauges.detail is not None, timeout=120)
        assert screen.replay.simulation is None and screen.detail is None   # the exact pass still runs
        assert gauges.first_look
        looked = screen_text(app)
        assert "exact counting…" in looked and "first look by the heuristic, counting exactly" in looked
        assert f"of window {expected['window']:,}" in looked   # the request drawn is the last turn's
        assert screen.query_one(ReplayControls).turn == len(expected["turns"])

        await ready(pilot, len(expected["turns"]))
        drawn = screen_text(app)
        assert not gauges.first_look and "counting" not in drawn and "first look" not in drawn
        mark = "≈" if last["estimated"] else ""
        assert f"sent {mark}{last['sent_tokens']:,} of window {expected['window']:,}" in drawn
        assert f"without compaction ≈{last['raw_tokens']:,}" in drawn
        assert [t.to_json() for t in screen.replay.simulation.turns] == expected["turns"]


async def test_the_heuristic_counter_needs_no_first_look():
    app = app_for("npm-install-flood.jsonl", counter="heuristic")
    async with app.run_test(size=(160, 48)) as pilot:
        seen = []
        gauges = app.screen.query_one(Gauges)
        while app.screen.detail is None:
            seen.append(gauges.first_look)
            await pilot.pause(0.01)
        await ready(pilot)
        assert not any(seen) and "first look" not in screen_text(app)
