"""The gauges never hide the verdict (37.8), flag a recorded request above the window in use
(37.9) and say which request the API's figure is of (37.10: the request's own where recorded,
else the latest before it, test_provider_figure.py); simulate --json carries the flag per
turn (`recorded_over_window`, trust-accounting's, on the request billed), the same comparison as the
screen's (core/log/edits.py above_window)."""

from __future__ import annotations

import json
import subprocess
import sys

from ui_support import app_for, ready, screen_text

from breakwater.cli.core import sample_path
from support.transcripts import REAL
from breakwater.ui.screens.context import ContextScreen
from breakwater.ui.widgets.gauges import Gauges

WINDOW = 20_000   # below long-refactor's recorded requests (21,571 at turn 176)


async def test_at_100_columns_the_verdict_and_the_zone_come_first_and_are_whole():
    # a Claude Code session whose requests no compaction gets under an 8,000 window
    app = app_for(REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl", window=8_000, counter="heuristic")
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        assert not app.screen.detail.view.fits
        line = screen_text(app).splitlines()[1]
        assert line.lstrip().startswith("DOES NOT FIT THE WINDOW · hard zone · sent")
        # the detail the line has no room for is whole in the x view
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ContextScreen)
        figures = app.screen.figures.plain
        assert "history before stages" in figures and app.screen_stack[-2].detail.calibration.describe() in figures


async def test_a_recorded_request_above_the_window_is_flagged_and_its_turn_said():
    app = app_for("long-refactor.jsonl", window=WINDOW, counter="heuristic")
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot)
        v = app.screen.detail.view
        # the pipeline knew turn 176's figure when it planned 177; the transcript records 177's own
        assert v.api_tokens == 21_571 and v.api_turn == 176 and v.api_above_window
        assert app.screen.replay.stats(177).billed_tokens == 21_950
        text = screen_text(app)
        assert f"API 21,950 (recorded at this turn) ABOVE THE WINDOW {WINDOW:,}" in text


def test_simulate_json_carries_the_flag_per_turn_as_the_screen_does():
    # one comparison (edits.above_window): simulate --json's recorded_over_window on the request the
    # provider billed above the window, the gauge's flag on that figure when a later turn shows it
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(sample_path()), "--json",
                          "--window", str(WINDOW), "--counter", "heuristic"], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    turns = json.loads(out)["turns"]
    assert any(t.get("recorded_over_window") for t in turns)
    for t in turns:
        assert bool(t.get("recorded_over_window")) == (t.get("billed_tokens") is not None
                                                      and t["billed_tokens"] > WINDOW)
    by_turn = {t["turn"]: t for t in turns}
    for t in turns:   # the API figure a request shows is the one billed for the request it names
        if "api_tokens" in t and t["turn"] - 1 in by_turn:
            before = by_turn[t["turn"] - 1]
            if before.get("billed_tokens") == t["api_tokens"]:
                assert bool(before.get("recorded_over_window")) == (t["api_tokens"] > WINDOW)


async def test_a_proxied_session_shows_nothing_unseen(tmp_path):
    """`breakwater proxy` records whole requests (system prompt, tool schemas): the gauge drew the ▓
    glyph of the unseen overhead beside "whole request counted, nothing unseen"."""
    from test_proxy_accounting import _proxied   # a real proxy process in front of the scripted provider

    log, _ = _proxied(tmp_path, "anthropic", "--observe")
    app = app_for(log, counter="heuristic")
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot)
        gauge = "\n".join(screen_text(app).splitlines()[1:5])
        assert app.screen.detail.calibration.whole
        assert "whole request counted, nothing unseen" in gauge
        assert "▓" not in gauge, gauge


async def test_the_header_names_the_counter_in_effect_as_simulate_json_and_the_page_do():
    # "exact" asked for a Claude model: no tokenizer here counts it, so the heuristic does, and the
    # header said "counter exact" where simulate --json and an exported page said "heuristic"
    path = REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl"
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json", "--window", "60000"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["counter"] == "heuristic"
    app = app_for(path, window=60_000, counter="exact")
    async with app.run_test(size=(200, 30)) as pilot:
        await ready(pilot)
        header = screen_text(app).splitlines()[0]
        assert "counter heuristic" in header and "counter exact" not in header
    # a model the tokenizer knows keeps "exact" in both
    app = app_for("long-refactor.jsonl", counter="exact")
    async with app.run_test(size=(200, 30)) as pilot:
        await ready(pilot)
        assert "counter exact" in screen_text(app).splitlines()[0]


async def test_a_figure_over_the_window_that_fits_by_the_tokenizers_count_says_which_count_decided(tmp_path):
    # no usage recorded: the figure is the heuristic's (one figure a request, issue 36), the verdict the
    # tokenizer's near the limits. English prose: the heuristic counts ~25% more than o200k, so the
    # request shows above the window and fits; the gauge said nothing of why
    from breakwater.core.log.message import Message
    from synth import write_session

    import random

    rng = random.Random(7)
    words = "the quick brown fox jumps over lazy dog while a river runs under old stone bridge".split()
    prose = " ".join(rng.choice(words) for _ in range(6600))   # heuristic ~8,500, o200k 6,600
    path = write_session(tmp_path / "prose.jsonl", [Message("m1", "user", prose, turn=1),
                                                    Message("m2", "assistant", "Noted.", turn=1)],
                         header={"model": "gpt-4o", "window": 8_000})
    app = app_for(path, counter="exact")
    async with app.run_test(size=(200, 30)) as pilot:
        await ready(pilot)
        v = app.screen.detail.view
        assert v.fits and v.estimated and v.sent_tokens > v.window == 8_000
        line = screen_text(app).splitlines()[1]
        assert f"sent ≈{v.sent_tokens:,} of window 8,000" in line and "fits by the tokenizer's count" in line
