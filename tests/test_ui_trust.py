"""Issue 26: after a manual action (trigger, deep compaction, undo) every place that shows the state
shows the new one, and a preview promises what the action really does."""

from __future__ import annotations

import json
import shutil
from contextlib import asynccontextmanager

from ui_support import ready, screen_text, until

from breakwater.cli.core import read_session, sample_path
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


@asynccontextmanager
async def opened(path, turn, size=SIZE, *, focus_list=True):
    """The workbench on `path` at `turn`, ready, the message list focused for the controls."""
    app = open_app(path, turn=turn)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, turn)
        if focus_list:
            app.screen.query_one(MessageList).focus()
        yield app, pilot


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
    async with opened(path, turn) as (app, pilot):
        screen = app.screen
        for key in "SM":       # stages run by hand first: the preview starts from them
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
        await settled(pilot, turn, 3, path, dialog and screen.fidelity)
        # the request sent is the one the preview showed, and it lost exactly what the preview listed
        assert screen.query_one(Gauges).detail.view.sent_tokens == proposal.tokens_after
        assert f"sent ≈{proposal.tokens_after:,}" in screen_text(app)
        assert missing(screen, turn) - missing_now == lost


def compaction_line(app) -> str:
    return next(line for line in screen_text(app).splitlines() if "deep compaction" in line and "▼" in line)


async def test_an_undone_deep_compaction_is_no_longer_counted_nor_after_reopening(tmp_path):
    path = recording(tmp_path)
    turn = 60
    async with opened(path, turn) as (app, pilot):
        screen = app.screen
        await until(pilot, lambda: screen.fidelity is not None, 180)
        counted = compaction_line(app)
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, SummaryReviewScreen))
        await pilot.press("ctrl+s")
        await settled(pilot, turn, 1, path, screen.fidelity)
        assert "by this policy, 1 by you" in compaction_line(app)   # a manual D is said to be yours (issue 37.2)
        await press_and_settle(pilot, "u", turn, path)
        assert compaction_line(app) == counted
        assert screen.replay.simulation.recorded == []
    async with opened(path, turn, focus_list=False) as (again, pilot):
        assert compaction_line(again) == counted


async def test_the_overlay_is_shown_listed_and_cleared_one_or_all(tmp_path):
    from breakwater.core.simulate import view_at
    from breakwater.ui.screens.overlay import OverlayScreen

    path = recording(tmp_path)
    turn = 60
    policy = preset("breakwater").with_changes(window=32000)
    async with opened(path, turn) as (app, pilot):
        assert "applied" not in screen_text(app).splitlines()[0]
        for key in "SM":
            await press_and_settle(pilot, key, turn, path)
        assert "✎ 2 edits applied" in screen_text(app).splitlines()[0]

    recorded = view_at(read_session(path), policy, turn, counter="heuristic").sent_tokens
    async with opened(path, turn, (100, 30), focus_list=False) as (again, pilot):
        screen = again.screen
        top = screen_text(again).splitlines()[0]
        assert "✎ 2 edits applied" in top                          # at 100 columns too
        assert screen.detail.view.sent_tokens != recorded
        assert any(str(overlay_path(path)) in str(n.message) for n in again._notifications)
        titles = [c.title for c in again.get_system_commands(screen)]
        assert "Overlay: show the 2 edits applied" in titles and "Overlay: clear every edit" in titles
        await screen.run_action("show_overlay")
        await until(pilot, lambda: isinstance(again.screen, OverlayScreen))
        await pilot.pause()
        listed = screen_text(again)
        assert "mask triggered by hand from turn 60" in listed and "snip triggered by hand from turn 60" in listed
        assert "kept in" in listed and str(overlay_path(path)) in again.screen._what().plain
        await pilot.press("enter")                                  # clears the first: the snip
        await until(pilot, lambda: len(overlay_events(path)) == 1)
        await until(pilot, lambda: "✎ 1 edit applied" in screen_text(again).splitlines()[0])
        assert [e.get("stage") for e in overlay_events(path)] == ["mask"]
        await screen.run_action("show_overlay")
        await until(pilot, lambda: isinstance(again.screen, OverlayScreen))
        await pilot.press("a")
        await until(pilot, lambda: not overlay_events(path))
        await until(pilot, lambda: "applied" not in screen_text(again).splitlines()[0])
        await until(pilot, lambda: screen.detail is not None and screen.detail.view.sent_tokens == recorded)


def test_clearing_an_overlay_edit_keeps_every_other_line_as_it_was(tmp_path):
    path = tmp_path / "s.overlay.jsonl"
    pin = {"type": "pin", "id": "o00001", "at": 3, "message_id": "m1"}
    lines = [json.dumps(pin), "{not json", json.dumps({"type": "trigger", "at": 4, "stage": "mask"}),
             json.dumps({"type": "undo", "id": "o00009", "at": 5, "target": "o00001"})]
    path.write_text("\n".join(lines) + "\n")
    overlay = OverlayFile(path)
    assert [e.id for e in overlay.events] == ["o00001", "o00002", "o00009"]
    removed = overlay.remove(["o00001"])        # the undo naming it goes with it
    assert [e.id for e in removed] == ["o00001", "o00009"]
    assert path.read_text() == "{not json\n" + lines[2] + "\n"
    assert [e.get("stage") for e in OverlayFile(path).events] == ["mask"] == [e.get("stage") for e in overlay.events]


async def test_a_stage_run_by_hand_that_would_enlarge_the_request_is_not_run(tmp_path):
    path = recording(tmp_path)
    turn = 60
    async with opened(path, turn) as (app, pilot):
        screen = app.screen
        for key in "SM":
            await press_and_settle(pilot, key, turn, path)
        masked = screen.detail.view.sent_tokens
        await pilot.press("C")      # microcompact after mask: ≈12,988 → ≈13,125 on this sample
        await until(pilot, lambda: any("nothing was done" in str(n.message) for n in app._notifications))
        note = next(str(n.message) for n in app._notifications if "nothing was done" in str(n.message))
        assert note.startswith(f"Microcompact now would make the request at turn 60 larger ({masked:,} → ")
        await pilot.pause(0.5)
        assert [e.get("stage") for e in overlay_events(path)] == ["snip", "mask"]
        assert screen.detail.view.sent_tokens == masked and f"sent ≈{masked:,}" in screen_text(app)


def footer(app) -> str:
    return screen_text(app).splitlines()[-1]


async def test_the_footer_says_which_keys_the_focused_part_took(tmp_path):
    from breakwater.ui.spill.view import SpillView

    workspace = tmp_path / "ws"
    (workspace / ".agent" / "spill").mkdir(parents=True)
    app = make_app(read_session(sample_path(SAMPLE)), preset("breakwater"), turn=12, counter="heuristic",
                   settings=UISettings(), workspace=workspace)
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot, 12)
        screen = app.screen
        await pilot.pause(0.2)
        assert "←→ Step" in footer(app) and "replay:" not in footer(app)
        await pilot.press("s")
        spill_file = screen.query_one(SpillView)
        spill_file.focus()
        await pilot.pause(0.2)
        line = footer(app)
        # the spill file's keys under its name, then the replay's that still work: → and end are its now
        assert line.index("spill file:") < line.index("Tail") < line.index("replay:") < line.index("Deep compact")
        assert "Step" not in line and "end Last" not in line and "Lost facts" not in line
        await pilot.press("right")
        await pilot.pause(0.2)
        assert screen.turn == 12
        await pilot.press("s")
        await pilot.pause(0.2)
        assert "←→ Step" in footer(app) and "spill file:" not in footer(app)
