"""Issue 26: after a manual action (trigger, deep compaction, undo) every place that shows the state
shows the new one, and a preview promises what the action really does."""

from __future__ import annotations

import shutil

from ui_support import ready, screen_text, until

from breakwater.core.commands import read_session, sample_path
from breakwater.core.overlay import OverlayFile, overlay_path
from breakwater.core.policy import preset
from breakwater.ui.app import make_app
from breakwater.ui.config import UISettings
from breakwater.ui.screens.dialogs import SummaryReviewScreen
from breakwater.ui.widgets.gauges import Gauges
from breakwater.ui.widgets.message_list import MessageList
from breakwater.ui.widgets.would_lose import WouldLose

SIZE = (160, 48)
SAMPLE = "long-refactor.jsonl"


def recording(tmp_path, name=SAMPLE):
    path = tmp_path / name
    shutil.copy(sample_path(name), path)
    return path


def open_app(path, turn=None):
    return make_app(read_session(path), preset("breakwater").with_changes(window=32000), turn=turn,
                    counter="heuristic", settings=UISettings(), overlay=OverlayFile(overlay_path(path)))


def overlay_events(path) -> list:
    return OverlayFile(overlay_path(path)).events


async def press_and_settle(pilot, key, turn, path):
    """Press `key` (a control that writes one overlay event) and wait until the screen shows turn
    `turn` re-simulated with it and measured again."""
    screen = pilot.app.screen
    before, measured = len(overlay_events(path)), screen.fidelity
    await pilot.press(key)
    await settled(pilot, turn, before + 1, path, measured)


async def settled(pilot, turn, events_in_overlay, path, measured):
    screen = pilot.app.screen
    await until(pilot, lambda: len(overlay_events(path)) == events_in_overlay)
    await until(pilot, lambda: screen.fidelity is not None and screen.fidelity is not measured, 180)
    await ready(pilot, turn)


def missing(screen, turn) -> set[str]:
    return {p.id for p, _ in screen.fidelity.missing_at(turn)}


async def test_the_deep_compaction_preview_shows_the_request_and_the_losses_it_will_really_have(tmp_path):
    path = recording(tmp_path)
    turn = 60
    app = open_app(path, turn=turn)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, turn)
        screen = app.screen
        screen.query_one(MessageList).focus()
        for key in "SMC":       # stages run by hand first: the preview starts from them
            await press_and_settle(pilot, key, turn, path)
        sent_now = screen.detail.view.sent_tokens
        missing_now = missing(screen, turn)
        assert f"sent ≈{sent_now:,}" in screen_text(app)
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, SummaryReviewScreen))
        dialog = app.screen
        await pilot.pause()
        proposal = dialog.proposal
        lost = {p.id for p in dialog.query_one(WouldLose).lost}
        text = screen_text(app)
        assert f"request {sent_now:,} → {proposal.tokens_after:,} tokens" in text
        await pilot.press("ctrl+s")
        await settled(pilot, turn, 4, path, dialog and screen.fidelity)
        # the request sent is the one the preview showed, and it lost exactly what the preview listed
        assert screen.query_one(Gauges).detail.view.sent_tokens == proposal.tokens_after
        assert f"sent ≈{proposal.tokens_after:,}" in screen_text(app)
        assert missing(screen, turn) - missing_now == lost


def compaction_line(app) -> str:
    return next(line for line in screen_text(app).splitlines() if "deep compaction" in line and "▼" in line)


async def test_an_undone_deep_compaction_is_no_longer_counted_nor_after_reopening(tmp_path):
    path = recording(tmp_path)
    turn = 60
    app = open_app(path, turn=turn)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, turn)
        screen = app.screen
        screen.query_one(MessageList).focus()
        await until(pilot, lambda: screen.fidelity is not None, 180)
        counted = compaction_line(app)
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, SummaryReviewScreen))
        await pilot.press("ctrl+s")
        await settled(pilot, turn, 1, path, screen.fidelity)
        assert "by this policy, 1 recorded" in compaction_line(app)
        await press_and_settle(pilot, "u", turn, path)
        assert compaction_line(app) == counted
        assert screen.replay.simulation.recorded == []
    again = open_app(path, turn=turn)
    async with again.run_test(size=SIZE) as pilot:
        await ready(pilot, turn)
        assert compaction_line(again) == counted
