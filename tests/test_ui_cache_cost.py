"""What compaction makes the provider write again in its prompt cache is on the timeline and in A/B, in
tokens and money, as `simulate --json` totals it (issue 36.7): on a real Claude Code transcript at a
100,000 window SWE-agent's LastNObservations (masking one more observation each turn) costs more than it
saves, and both screens say so first; the agent's own strategy beside it saves money."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ui_support import app_for, ready, screen_text, until

from breakwater.core.figures import money
from breakwater.ui.widgets.timeline import Timeline

CCL = Path(__file__).resolve().parent / "fixtures" / "real" / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl"


def _totals(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(CCL), "--json", "--window", "100000",
                          "--counter", "heuristic", *args], capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout)["totals"]


def _said(t: dict) -> str:
    wrote = f"{t['cache_rewritten']:,} cached tokens (+{money(t['cache_rewrite_cost'])} over reading them)"
    if t["cost_sent"] > t["cost_raw"]:
        return f"compaction costs {money(t['cost_sent'] - t['cost_raw'])} more than it saves: it re-wrote {wrote}"
    return f"compaction re-wrote {wrote}"


async def test_the_cache_rewrites_of_compaction_are_on_the_timeline_and_in_a_b():
    app = app_for(CCL, window=100000, counter="heuristic", preset="swe-agent-last-n")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await until(pilot, lambda: app.screen.query_one(Timeline).simulation is not None, 120)
        await pilot.pause()
        a = _totals("--preset", app.screen.query_one(Timeline).simulation.policy.preset)
        assert a["cost_sent"] > a["cost_raw"] and a["cache_rewritten"] > 0
        drawn = screen_text(app)
        assert _said(a).startswith("compaction costs ") and _said(a) in drawn
        assert f"{money(a['cost_raw'])} → {money(a['cost_sent'])}" in drawn
        await pilot.press("c")
        await until(pilot, lambda: type(app.screen).__name__ == "CompareScreen" and app.screen.comparison is not None, 180)
        await pilot.pause()
        b = _totals("--preset", app.screen.b.policy.preset)
        drawn = " ".join(screen_text(app).split())     # the A/B totals wrap their lines
        assert f"A: {money(a['cost_raw'])} → {money(a['cost_sent'])} · {_said(a)}" in drawn
        assert f"B: {money(b['cost_raw'])} → {money(b['cost_sent'])} · {_said(b)}" in drawn
        delta = b["cost_sent"] - a["cost_sent"]
        assert f"B − A: {'+' if delta >= 0 else '−'}{money(abs(delta))}" in drawn
