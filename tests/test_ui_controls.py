"""Control by hand on a recording: pins, triggers, deep compactions and undos go to the sibling
overlay (never into the recording), show at once, and come back when the session is reopened."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from ui_support import ready, screen_text, until

from breakwater.cli.core import read_session, sample_path
from breakwater.core.overlay import OverlayFile, overlay_path
from breakwater.core.policy import preset
from breakwater.core.simulate import view_at
from breakwater.ui.app import make_app
from breakwater.ui.config import UISettings
from breakwater.ui.screens.dialogs import SummaryReviewScreen
from breakwater.ui.widgets.message_list import MessageList

SIZE = (160, 48)
REAL = Path(__file__).resolve().parent / "fixtures" / "real"   # copies of the shared fixtures


def recording(tmp_path, name="long-refactor.jsonl"):
    path = tmp_path / name
    shutil.copy(sample_path(name), path)
    return path


def open_app(path, turn=None):
    log = read_session(path)
    overlay = OverlayFile(overlay_path(path))
    return make_app(log, preset("breakwater").with_changes(window=32000), turn=turn, counter="heuristic",
                    settings=UISettings(), overlay=overlay)


async def d_review(pilot, turn):
    """At `turn`, D from the list: the replay screen, once the summary's review is open."""
    await ready(pilot, turn)
    screen = pilot.app.screen
    screen.query_one(MessageList).focus()
    await pilot.press("D")
    await until(pilot, lambda: isinstance(pilot.app.screen, SummaryReviewScreen))
    return screen


async def pin_a_masked_message(pilot, turn):
    """At `turn`, select the first message the request masks and press P: (screen, list, its id)."""
    await ready(pilot, turn)
    screen = pilot.app.screen
    lst = screen.query_one(MessageList)
    masked = next(e.message_id for e in screen.detail.view.edits if e.kind == "masked")
    lst.select_id(masked)
    lst.focus()
    await pilot.press("P")
    return screen, lst, masked


async def test_a_pin_goes_to_the_overlay_shows_at_once_and_is_there_when_reopened(tmp_path):
    path = recording(tmp_path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    app = open_app(path, turn=40)
    async with app.run_test(size=SIZE) as pilot:
        screen, lst, masked = await pin_a_masked_message(pilot, 40)
        await until(pilot, lambda: masked in lst.pins and screen.detail is not None
                    and not any(e.message_id == masked and e.kind == "masked" for e in screen.detail.view.edits))
        await ready(pilot, 40)
        assert "pin" in screen_text(app)
    (event,) = OverlayFile(overlay_path(path)).events
    assert event.type == "pin" and event.get("message_id") == masked
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest   # the recording is untouched

    again = open_app(path, turn=40)
    async with again.run_test(size=SIZE) as pilot:
        await ready(pilot, 40)
        assert masked in again.screen.query_one(MessageList).pins
        expected = view_at(OverlayFile(overlay_path(path)).apply(read_session(path)),
                           preset("breakwater").with_changes(window=32000), 40, counter="heuristic")
        assert again.screen.detail.view == expected

    # and the headless command reads the same overlay
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json", "--counter",
                          "heuristic", "--window", "32000", "--preset", "breakwater",
                          "--overlay", str(overlay_path(path))], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["turns"][39]["sent_tokens"] == expected.sent_tokens


async def test_trigger_then_undo_from_the_keys(tmp_path):
    path = recording(tmp_path)
    app = open_app(path, turn=12)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 12)
        screen = app.screen
        screen.query_one(MessageList).focus()
        before = screen.detail.view.sent_tokens
        await pilot.press("C")   # microcompact now
        await until(pilot, lambda: screen.detail is not None and screen.detail.view.turn == 12
                    and screen.detail.view.edit_counts().get("microcompacted", 0) > 0)
        assert screen.detail.view.sent_tokens < before
        await pilot.press("u")
        await until(pilot, lambda: len(OverlayFile(overlay_path(path)).events) == 2)
        await until(pilot, lambda: screen.detail is not None and screen.detail.view.turn == 12
                    and screen.detail.view.sent_tokens == before)
    types = [e.type for e in OverlayFile(overlay_path(path)).events]
    assert types == ["trigger", "undo"]


async def test_a_deep_compaction_is_previewed_edited_and_recorded_in_the_overlay(tmp_path):
    path = recording(tmp_path)
    app = open_app(path, turn=30)
    async with app.run_test(size=SIZE) as pilot:
        screen = await d_review(pilot, 30)
        assert "Replaces" in screen_text(app)
        app.screen.query_one("#review-text").text = "## Original goal\n- kept by hand"
        await pilot.press("ctrl+s")
        await until(pilot, lambda: screen.detail is not None and screen.detail.summary is not None
                    and "kept by hand" in screen.detail.summary.message.content)
    (event,) = OverlayFile(overlay_path(path)).events
    assert event.type == "compaction" and event.get("trigger") == "manual" and event.get("reviewed") == "edited"


async def test_cancelling_the_preview_records_nothing(tmp_path):
    path = recording(tmp_path)
    app = open_app(path, turn=30)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 30)
        app.screen.query_one(MessageList).focus()
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, SummaryReviewScreen))
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SummaryReviewScreen))
    assert not overlay_path(path).exists()


async def test_each_stage_can_be_triggered_from_its_key(tmp_path):
    path = recording(tmp_path)
    app = open_app(path, turn=12)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 12)
        app.screen.query_one(MessageList).focus()
        for n, key in enumerate(("S", "M", "C"), 1):
            await pilot.press(key)
            await until(pilot, lambda: len(OverlayFile(overlay_path(path)).events) == n
                        or any("nothing was done" in str(m.message) for m in app._notifications))
            await ready(pilot, 12)
        # microcompact after mask would make the request larger: it says so and is not recorded
        assert any(str(m.message).startswith("Microcompact now would make") for m in app._notifications)
    stages = [e.get("stage") for e in OverlayFile(overlay_path(path)).events]
    assert stages == ["snip", "mask"]


async def test_undo_of_a_pin_unpins(tmp_path):
    path = recording(tmp_path)
    app = open_app(path, turn=40)
    async with app.run_test(size=SIZE) as pilot:
        screen, lst, masked = await pin_a_masked_message(pilot, 40)
        await until(pilot, lambda: masked in lst.pins)
        await pilot.press("u")
        await until(pilot, lambda: masked not in lst.pins and screen.detail is not None
                    and any(e.message_id == masked and e.kind == "masked" for e in screen.detail.view.edits))
    assert [e.type for e in OverlayFile(overlay_path(path)).events] == ["pin", "undo"]


async def test_undo_takes_back_an_edit_of_this_turn_and_the_title_counts_those_in_effect(tmp_path):
    path = recording(tmp_path)
    app = open_app(path, turn=99)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 99)
        screen = app.screen
        screen.query_one(MessageList).focus()
        # turn 99, not 105: once breakwater masks it masks every far result (issue 41), as it does at 105
        # already, and a mask by hand that would not make the request smaller is not recorded
        await pilot.press("M")
        await until(pilot, lambda: len(OverlayFile(overlay_path(path)).events) == 1)
        await ready(pilot, 99)
        assert "✎ 1 edit applied" in screen_text(app).splitlines()[0]
        await pilot.press("u")
        await until(pilot, lambda: len(OverlayFile(overlay_path(path)).events) == 2)
        await ready(pilot, 99)
        assert "edit applied" not in screen_text(app).splitlines()[0]   # an undo is no edit: none in effect
        await pilot.press("M")
        await until(pilot, lambda: len(OverlayFile(overlay_path(path)).events) == 3)
        # at turn 70 the mask made at turn 99 is not this request's to undo
        screen._go(70)
        await ready(pilot, 70)
        screen.query_one(MessageList).focus()
        await pilot.press("u")
        await until(pilot, lambda: any("Nothing to undo at or before turn 70" in str(n.message)
                                       for n in app._notifications))
        assert len(OverlayFile(overlay_path(path)).events) == 3
        assert "✎ 1 edit applied" in screen_text(app).splitlines()[0]


async def test_d_with_nothing_left_to_summarize_offers_nothing_and_says_why(tmp_path):
    path = recording(tmp_path)
    app = open_app(path, turn=30)
    nothing = "Nothing to compact at turn 30"
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 30)
        screen = app.screen
        # D, accept, again: each takes what the last left, until nothing is left to summarize
        for accepted in range(6):
            screen.query_one(MessageList).focus()
            await pilot.press("D")
            await until(pilot, lambda: any(nothing in str(n.message) or "Nothing before" in str(n.message)
                                           for n in app._notifications)
                        or isinstance(app.screen, SummaryReviewScreen))
            if not isinstance(app.screen, SummaryReviewScreen):
                break
            assert app.screen.proposal.covered, "offered a summary that replaces no message"
            await pilot.press("ctrl+s")
            await until(pilot, lambda: len(OverlayFile(overlay_path(path)).events) == accepted + 1)
            await ready(pilot, 30)
        assert any(nothing in str(n.message) or "Nothing before" in str(n.message) for n in app._notifications)


async def test_d_at_a_turn_the_policy_already_compacts_offers_nothing_and_says_why(tmp_path):
    """The state the issue met ("Replaces 0 messages (—) 33,330 → 33,330" at the last turn), as a
    user meets it: a real Claude Code transcript replayed at a 16,000 window, whose policy compacts
    on its own at the last request (103). D there made the very same summary and offered it."""
    path = tmp_path / "ccl.jsonl"
    shutil.copy(REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl", path)
    log = read_session(path)
    app = make_app(log, preset("breakwater").with_changes(window=16000), turn=1, counter="heuristic",
                   settings=UISettings(), overlay=OverlayFile(overlay_path(path)))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 1)
        screen = app.screen
        await pilot.press("end")
        await ready(pilot, 103)
        assert any(c.turn == 103 and c.trigger == "auto" for c in screen.replay.compactions().values())
        screen.query_one(MessageList).focus()
        await pilot.press("D")
        said = lambda: [str(n.message) for n in app._notifications if "turn 103" in str(n.message)]
        await until(pilot, lambda: said() or isinstance(app.screen, SummaryReviewScreen))
        assert not isinstance(app.screen, SummaryReviewScreen), "offered a summary that replaces no message"
        assert said()[0].startswith("Nothing to compact at turn 103: your policy already compacts this request")
        assert screen.detail.view.turn == 103
    assert not overlay_path(path).exists()


async def test_a_compaction_made_with_d_is_said_to_be_yours_not_the_transcripts(tmp_path):
    from breakwater.ui.widgets.timeline import Timeline

    path = recording(tmp_path)
    app = open_app(path, turn=30)
    async with app.run_test(size=SIZE) as pilot:
        screen = await d_review(pilot, 30)
        await pilot.press("ctrl+s")
        await until(pilot, lambda: screen.replay.recorded_origins() == {"by you": 1})
        await until(pilot, lambda: "1 by you" in screen_text(app))
        assert "recorded in the transcript" not in screen_text(app)
        assert screen.query_one(Timeline).origins == {"by you": 1}


def test_a_window_learnt_from_the_provider_is_said_to_come_from_it():
    from breakwater.core.log.session_log import Event, SessionLog
    from breakwater.core.replay import Replay

    log = read_session(sample_path("long-refactor.jsonl"))
    at = len(log.entries) // 2
    learnt = Event("config", "e-learnt", {"window": 20_000, "was": 32_000,
                                          "reason": "the provider's context-length error: maximum 20000"})
    log = SessionLog(log.header, [*log.entries[:at], learnt, *log.entries[at:]])
    replay = Replay(log, preset("breakwater").with_changes(window=32_000), "heuristic")
    replay.run()
    last = replay.detail(replay.turns)
    assert last.view.window == 20_000 and last.window_source == "the provider's error"
    assert replay.detail(1).window_source == "policy"


async def test_without_compaction_stays_put_through_d_undo_and_a_pin(tmp_path):
    """Found in tmux (issue 36, item 2): the real Claude Code transcript at a 60,000 window, the timeline's
    billed without compaction read 8,585,719; after D was accepted 9,529,056; after undoing it and a pin,
    8,648,946. It is the transcript's figure: the same after each, and what `simulate --json` totals."""
    from breakwater.ui.widgets.timeline import Timeline

    path = tmp_path / "ccl.jsonl"
    shutil.copy(REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl", path)
    app = make_app(read_session(path), preset("breakwater").with_changes(window=60000), turn=50, counter="exact",
                   settings=UISettings(), overlay=OverlayFile(overlay_path(path)))
    events = lambda: len(OverlayFile(overlay_path(path)).events)

    async def without(pilot, before=None) -> int:
        """The timeline's figure, once a simulation newer than `before` is drawn."""
        timeline = pilot.app.screen.query_one(Timeline)
        await until(pilot, lambda: timeline.simulation is not None and timeline.simulation is not before, 120)
        await pilot.pause()
        line = next(line for line in screen_text(pilot.app).splitlines() if "billed without compaction ≈" in line)
        return int(line.split("without compaction ≈")[1].split()[0].replace(",", ""))

    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 50)
        screen = app.screen
        timeline = screen.query_one(Timeline)
        figures = [await without(pilot)]
        await d_review(pilot, 50)
        sim = timeline.simulation
        await pilot.press("ctrl+s")
        await until(pilot, lambda: events() == 1)
        figures.append(await without(pilot, sim))
        assert timeline.simulation.billed_sent != sim.billed_sent   # the D changed what is sent
        sim = timeline.simulation
        await ready(pilot, 50)
        screen.query_one(MessageList).focus()
        await pilot.press("u")
        await until(pilot, lambda: events() == 2)
        figures.append(await without(pilot, sim))
        sim = timeline.simulation
        await ready(pilot, 50)
        lst = screen.query_one(MessageList)
        lst.select_id(lst.messages[5].id)
        lst.focus()
        await pilot.press("P")
        await until(pilot, lambda: events() == 3)
        figures.append(await without(pilot, sim))
    assert [e.type for e in OverlayFile(overlay_path(path)).events] == ["compaction", "undo", "pin"]
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json", "--window", "60000",
                          "--preset", "breakwater", "--overlay", str(overlay_path(path))],
                         capture_output=True, text=True, check=True, timeout=300)
    assert figures == [json.loads(out.stdout)["totals"]["billed_raw"]] * 4, figures
