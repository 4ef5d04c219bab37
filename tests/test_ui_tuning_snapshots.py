"""SVG snapshots of the policy panel and of the A/B view, in both themes, at 100x30 and 200x60.

Regenerate after a deliberate change of look with `make snapshots` (every snapshot file), and review the SVGs.
"""

import pytest

from breakwater.cli.core import read_session, sample_path
from breakwater.core.policy import PRESETS
from breakwater.ui.app import make_app
from breakwater.ui.config import UISettings
from breakwater.ui.screens.compare import CompareScreen
from breakwater.ui.widgets.compare import CompareTotals
from ui_support import app_for, measured, ready, until

SIZES = [(100, 30), (200, 60)]   # the smallest terminal the workbench is made for, and a large one
THEMES = ("breakwater-dark", "breakwater-light")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("theme", THEMES)
def test_policy_panel(snap_compare, theme, size):
    app = app_for("long-refactor.jsonl", counter="heuristic", settings=UISettings(theme=theme))

    async def edited(pilot):
        await ready(pilot)
        await pilot.press("p")
        await pilot.pause()
        panel = app.screen.query_one("#policy")
        panel.select("window")
        await pilot.press("left", "left")
        await until(pilot, lambda: app.screen.replay.policy.window == 30_000
                    and app.screen.query_one("#timeline").simulation is app.screen.replay.simulation
                    and app.screen.replay.simulation is not None
                    and not app.screen.query_one("#controls").pending, timeout=90)
        await measured(pilot)
        panel.query_one("#policy-input").cursor_blink = False  # a blinking cursor makes the picture random
        panel.select("soft_ratio")
        await pilot.press("enter", *"0.9", "enter")  # refused: the reason shows in the panel
        await pilot.pause(0.5)

    assert snap_compare(app, terminal_size=size, run_before=edited)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("theme", THEMES)
def test_comparison(snap_compare, theme, size):
    log = read_session(sample_path("long-refactor.jsonl"))
    window = log.header["window"]
    app = make_app(log, PRESETS["seed-000"].with_changes(window=window), counter="heuristic", turn=150,
                   settings=UISettings(theme=theme), compare=PRESETS["seed-001"].with_changes(window=window))

    async def compared(pilot):
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.pair is not None
                    and app.screen.pair.turn == 150
                    and len(app.screen.query_one(CompareTotals).recall) == 2, timeout=90)
        await pilot.press("n")
        await pilot.pause(0.5)

    assert snap_compare(app, terminal_size=size, run_before=compared)
