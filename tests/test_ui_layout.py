"""Issue 26 item 9: every screen is usable at 100x30 and 120x40 — the footer keeps help, theme
and quit (and says how many keys it left out), the policy panel shows its settings and preset
column, the A/B view keeps its list and uncut figures."""

from __future__ import annotations

import pytest
from ui_support import app_for, ready, screen_text, until

from breakwater.ui.screens.compare import CompareScreen
from breakwater.ui.widgets.compare import CompareTotals
from breakwater.ui.widgets.message_list import MessageList
from breakwater.ui.widgets.policy_panel import PolicyTable


def footer(app) -> str:
    return screen_text(app).splitlines()[-1]


@pytest.mark.parametrize("size", [(100, 30), (120, 40)])
async def test_the_footer_keeps_help_theme_and_quit_and_counts_what_it_left_out(size):
    app = app_for(turn=40)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, 40)
        await pilot.pause(0.3)
        line = footer(app)
        for key in ("←→ Step", "space Play", "p Policy", "s Spill", "c A/B", "t Theme", "q Quit", "^p palette"):
            assert key in line
        left_out = int(line.split("f1 Help +")[1].split()[0])
        shown = sum(1 for b in app.screen.BINDINGS if b.show) - 1   # ← and → are one item
        assert 0 < left_out < shown


@pytest.mark.parametrize("size", [(100, 30), (120, 40)])
async def test_the_policy_panel_shows_its_settings_with_their_preset_values(size):
    app = app_for(turn=40)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, 40)
        await pilot.press("p")
        await pilot.pause(0.3)
        table = app.screen.query_one(PolicyTable)
        text = screen_text(app)
        header = next(line for line in text.splitlines() if "setting" in line and "value" in line)
        assert "preset" in header
        assert "buffer_tokens" in text and "13,000       13,000" in text
        # the panel has the side column to itself: more than a couple of settings show
        assert table.size.height - 1 >= (6 if size[1] == 30 else 18)


async def test_the_comparison_keeps_its_list_and_figures_at_100_columns():
    app = app_for(turn=40)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, 40)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.pair is not None, 60)
        await pilot.pause(0.5)
        screen = app.screen
        assert screen.query_one(MessageList).size.height >= 12
        totals = screen.query_one(CompareTotals)
        rows = [line for line in screen_text(app).splitlines()
                if line.startswith((" A  ", " B  ", " B − A")) and "sent" not in line]
        assert len(rows) == 3 and not any("…" in row.split("%)")[0] for row in rows)
        c = totals.comparison
        assert f"{c.totals[0].billed_sent:,}" in rows[0] and f"{c.totals[1].billed_sent:,}" in rows[1]


async def test_the_palette_screenshot_is_saved_under_the_state_directory_and_says_where(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))            # no ~/Downloads
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "home").mkdir()
    app = app_for(turn=40)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, 40)
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Screenshot")
        command.callback()
        await until(pilot, lambda: any(n.title == "Screenshot" for n in app._notifications), 10)
        note = next(n for n in app._notifications if n.title == "Screenshot")
        saved = list((tmp_path / "state" / "breakwater" / "screenshots").glob("*.svg"))
        assert len(saved) == 1 and str(saved[0]) in str(note.message) and note.severity == "information"
        assert "<svg" in saved[0].read_text()


def visible_turns(lst: MessageList) -> set[int]:
    top = lst.scroll_offset.y
    return {lst.messages[i].turn for i in lst.rows[top:top + lst.scrollable_content_region.height] if i >= 0}


async def test_going_to_a_turn_or_playing_shows_the_messages_of_that_turn():
    app = app_for(turn=10)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, 10)
        screen = app.screen
        lst = screen.query_one(MessageList)
        lst.focus()
        await pilot.press("g", *"120", "enter")
        await ready(pilot, 120)
        assert 120 in visible_turns(lst) and lst.messages[lst.selected_index].turn == 120
        await pilot.press("space")                     # play: the list follows the turns
        await until(pilot, lambda: screen.turn >= 123)
        await pilot.press("space")
        await ready(pilot)
        assert screen.turn in visible_turns(lst)
        await pilot.press("home")
        await ready(pilot, 1)
        assert 1 in visible_turns(lst)
