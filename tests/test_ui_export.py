"""Export… from the workbench's palette (issue 42): the state on screen — the turn, the policy as
tuned, B when A/B is open — written by the same code as `breakwater export`, with the figures
`simulate --json` prints for that state."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from textual.command import CommandPalette
from textual.widgets import Input

from breakwater.ui.screens.export import ExportScreen
from ui_support import app_for, ready, screen_text, until

SIZE = (120, 40)


def simulate_json(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", *args, "--json"], capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def data_values(page: str, side: str) -> dict[str, str]:
    return dict(re.findall(rf'data-side="{re.escape(side)}" data-key="(\w+)" data-value="([^"]*)"', page))


async def export_from_palette(pilot, name: str) -> None:
    app = pilot.app
    await pilot.press("ctrl+p")
    await until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*"Export")
    await pilot.pause(0.5)   # the palette searches in a worker
    await pilot.press("enter")
    await until(pilot, lambda: isinstance(app.screen, ExportScreen))
    box = app.screen.query_one(Input)
    box.value = name
    await pilot.press("enter")
    await until(pilot, lambda: not isinstance(app.screen, ExportScreen), timeout=120)


async def test_export_from_the_palette_writes_the_turn_and_policy_on_screen(tmp_path):
    from breakwater.cli.core import sample_path

    app = app_for("long-refactor.jsonl", turn=60, window=30000, counter="heuristic")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 60)
        screen = app.screen
        screen.cwd = tmp_path
        await export_from_palette(pilot, str(tmp_path / "at60.html"))
        await until(pilot, lambda: any("at60.html" in str(n.message) for n in app._notifications))
        assert [n.title for n in app._notifications if "at60.html" in str(n.message)] == ["Exported"]
    page = (tmp_path / "at60.html").read_text(encoding="utf-8")
    assert "turn 60 of 177" in page
    sim = simulate_json(str(sample_path("long-refactor.jsonl")), "--window", "30000", "--counter", "heuristic")
    shown = data_values(page, "this policy")
    for key in ("billed_raw", "billed_sent", "saved", "compactions", "turns"):
        assert int(shown[key]) == sim["totals"][key], key


async def test_a_bad_name_is_said_in_the_dialog_and_nothing_is_written(tmp_path):
    app = app_for("long-refactor.jsonl", counter="heuristic")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"Export")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ExportScreen))
        app.screen.query_one(Input).value = str(tmp_path / "page.pdf")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ExportScreen)
        assert "ending in .html or .md" in screen_text(app)
        app.screen.query_one(Input).value = str(tmp_path / "no" / "page.md")
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert "does not exist" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, ExportScreen))
    assert list(tmp_path.iterdir()) == []


async def test_export_from_a_b_puts_both_policies_in_the_markdown(tmp_path):
    app = app_for("long-refactor.jsonl", counter="heuristic")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("c")
        await until(pilot, lambda: type(app.screen).__name__ == "CompareScreen" and app.screen.turn is not None)
        b = app.screen.b.policy.preset
        await export_from_palette(pilot, str(tmp_path / "ab.md"))
    text = (tmp_path / "ab.md").read_text(encoding="utf-8")
    assert "| | A | B |" in text and f"### B: {b}" in text
