"""Fidelity in the workbench (issue 12): the gauge, the lost facts with their jump, the loop flag,
recall beside cost in A/B, and the facts a deep compaction would lose — driven by keys, checked
against `breakwater eval --json` and an independent `FidelityRun`."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys

from rich.console import Console
from textual.widgets import OptionList, Static, TextArea
from ui_support import app_for, measured, ready, screen_text, until

from breakwater.cli.core import read_session, sample_path
from breakwater.core.simulate import view_at
from breakwater.fidelity.probes import extract
from breakwater.fidelity.results import PINNED
from breakwater.fidelity.runner import policy_for, replay
from breakwater.fidelity.scoring import Scorer, at_risk, not_carried
from breakwater.ui.screens.compare import CompareScreen
from breakwater.ui.screens.dialogs import SummaryReviewScreen
from breakwater.ui.screens.fidelity import LostFactsScreen
from breakwater.ui.screens.help import HelpScreen
from breakwater.ui.widgets.compare import CompareTotals
from breakwater.ui.widgets.fidelity_gauge import FidelityGauge, percent
from breakwater.ui.widgets.message_list import MessageList
from breakwater.ui.widgets.would_lose import WouldLose

SIZE = (160, 48)
SAMPLE = "long-refactor.jsonl"


def eval_json(path, *presets) -> dict:
    out = subprocess.run([sys.executable, "-m", "breakwater", "eval", str(path), "--json", "--presets", ",".join(presets)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["sessions"][0]["presets"]


def independent_run(name: str, preset_name: str):
    log = read_session(sample_path(name))
    return replay(log, policy_for(preset_name, log, None))


async def opens(pilot, key: str, kind) -> None:
    """Press `key` and wait for the screen of type `kind` it opens."""
    await pilot.press(key)
    await until(pilot, lambda: isinstance(pilot.app.screen, kind))
    await pilot.pause()


def gauge_text(app) -> str:
    return app.screen.query_one(FidelityGauge).draw().plain


async def test_the_gauge_shows_eval_s_figures_turn_by_turn():
    expected = independent_run(SAMPLE, "breakwater")
    session = eval_json(sample_path(SAMPLE), "breakwater")["breakwater"]
    app = app_for(SAMPLE)
    async with app.run_test(size=SIZE) as pilot:
        await measured(pilot)
        run = app.screen.fidelity
        # the worker measured what `eval` measures, for the whole session
        assert (run.tally().recall(), run.tally().recall(PINNED)) == (session["recall"], session["pinned_recall"])
        assert run.kept == expected.kept and run.probes == expected.probes
        lost_turn = next(k for k, _ in expected.lost_turns())
        for turn in (expected.turns, lost_turn, 1):
            await pilot.press("g", *str(turn), "enter")
            await ready(pilot, turn)
            text = gauge_text(app)
            assert f"turn {turn}" in text
            assert f"all    {percent(expected.recall_at(turn)):>4}" in text
            assert f"pinned {percent(expected.pinned_at(turn)):>4}" in text
            lost = len(expected.lost_at(turn))
            assert (f"lost here {lost}" if lost else "nothing lost here") in text
        assert "facts kept" in screen_text(app)


async def test_f_lists_the_lost_facts_and_enter_jumps_to_their_message():
    expected = independent_run(SAMPLE, "breakwater")
    turn = max(expected.lost_turns(), key=lambda kn: kn[1])[0]
    lost_here = expected.lost_at(turn)
    app = app_for(SAMPLE, turn=turn)
    async with app.run_test(size=SIZE) as pilot:
        await measured(pilot)
        await opens(pilot, "f", LostFactsScreen)
        text = screen_text(app)
        assert f"Facts at turn {turn}" in text and f"{len(lost_here)} lost at this turn" in text
        assert f"{len(expected.missing_at(turn))} missing in all" in text
        options = app.screen.query_one(OptionList)
        first = [options.get_option_at_index(i).id for i in range(len(lost_here))]
        assert set(first) == {p.id for p in lost_here}          # those lost at this turn come first
        target = next(p for p in expected.probes if p.id == first[0])
        assert " ".join(target.text.split())[:40] in " ".join(text.split())
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, LostFactsScreen))
        lst = app.screen.query_one(MessageList)
        assert lst.messages[lst.selected_index].id == target.message_id
        # the key, its id and its help are in the help screen and the palette
        assert ("fidelity.lost", "f") in {(b[0], b[1]) for b in app.binding_table()}
        assert any(c.title == "Lost facts (f)" for c in app.get_system_commands(app.screen))
        await opens(pilot, "f1", HelpScreen)
        assert ("fidelity.lost", "f", "Lost facts") in {b[:3] for b in app.screen.bindings_table}
        console = Console(width=160, record=True, file=io.StringIO())
        for static in app.screen.query(Static):
            console.print(static.content)
        help_text = " ".join(console.export_text().split())
        assert "fidelity.lost" in help_text and "facts kept" in help_text and "re-read spiral" in help_text


async def test_a_looping_policy_is_flagged_with_what_it_means():
    app = app_for(SAMPLE, preset="seed-003")
    async with app.run_test(size=SIZE) as pilot:
        await measured(pilot)
        [loop] = app.screen.fidelity_loops
        assert loop.kind == "compaction-loop" and "⟳ loop" in gauge_text(app)
        assert loop.meaning in app.screen.query_one(FidelityGauge).tooltip
        await opens(pilot, "f", LostFactsScreen)
        flat = " ".join(screen_text(app).split())
        assert f"⟳ {loop.text}" in flat and "every few turns" in flat
        await pilot.press("escape")
    calm = app_for(SAMPLE)
    async with calm.run_test(size=SIZE) as pilot:
        await measured(pilot)
        assert calm.screen.fidelity_loops == [] and "⟳" not in gauge_text(calm)


async def test_a_b_shows_recall_next_to_cost_for_both_policies():
    session = eval_json(sample_path(SAMPLE), "breakwater", "seed-001")
    app = app_for(SAMPLE)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        await pilot.press("c")
        await until(pilot, lambda: isinstance(app.screen, CompareScreen)
                    and len(app.screen.query_one(CompareTotals).recall) == 2, timeout=180)
        await pilot.pause()
        screen = app.screen
        b = screen.b.policy.preset
        text = screen_text(app)
        for side, name in (("A", "breakwater"), ("B", b)):
            figures = session[name] if name in session else eval_json(sample_path(SAMPLE), name)[name]
            row = next(line for line in text.splitlines() if line.strip().startswith(side + " ") and "·" in line)
            assert f"{figures['billed_sent']:,}" in row                      # the cost …
            assert row.split()[-2:] == [f"{100 * figures['recall']:.1f}%", f"{100 * figures['pinned_recall']:.1f}%"]
        gauges = screen.query(FidelityGauge)
        assert len(gauges) == 2 and all(g.run is not None and f"turn {screen.turn}" in g.draw().plain for g in gauges)


async def test_the_summary_review_lists_the_facts_the_compaction_would_lose(tmp_path):
    path = tmp_path / SAMPLE
    shutil.copy(sample_path(SAMPLE), path)
    turn = 50
    app = app_for(path, turn=turn)
    async with app.run_test(size=SIZE) as pilot:
        await measured(pilot)
        await opens(pilot, "D", SummaryReviewScreen)
        review = app.screen
        log = read_session(path)
        before = view_at(log, app.replay.policy, turn)
        risky = at_risk(Scorer(extract(log)), before.messages, review.proposal.view.messages,
                        review.proposal.compaction.id, turn)
        lost = not_carried(risky, review.proposal.summary)
        assert review.at_risk == risky and 0 < len(lost) < len(risky)
        assert f"Would lose {len(lost)} of {len(risky)} facts" in screen_text(app)
        # what the user adds to the summary is no longer lost
        area = review.query_one("#review-text", TextArea)
        area.insert("\n- " + lost[0].text, area.document.end)
        await until(pilot, lambda: len(review.query_one(WouldLose).lost) == len(lost) - 1)
        assert f"Would lose {len(lost) - 1} of {len(risky)} facts" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, SummaryReviewScreen))


async def test_the_measurement_waits_while_the_user_steps_and_finishes_once_they_stop():
    # the measurement shares the GIL with the screen: while keys arrive it must give way, not finish
    app = app_for(SAMPLE)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.screen
        for i in range(40):   # ~3 s of stepping, past the delay after which the measurement starts
            await pilot.press("left" if i % 2 else "right")
            await pilot.pause(0.07)
        assert screen.fidelity is None and screen.fidelity_yielded > 0
        await measured(pilot)
        expected = independent_run(SAMPLE, "breakwater")
        assert screen.fidelity.recall_at(screen.turn) == expected.recall_at(screen.turn)


def _measuring_child() -> int | None:
    """The pid of this process's child measuring the facts gauge, if one runs."""
    import os
    from pathlib import Path

    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == os.getpid() and b"breakwater.fidelity.background" in cmdline:
            return int(proc.name)
    return None


def _state_and_nice(pid: int) -> tuple[str, int]:
    from pathlib import Path

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0], int(fields[16])


async def test_the_measurement_runs_in_a_low_priority_process_stopped_while_keys_arrive(tmp_path):
    """Measured in a thread it shared the interpreter with the screen: a key pressed after a pause
    waited for it (a window change repainted in 0.98 s against 0.47 s back to back). Now the screen's
    process does none of it: a child at the lowest priority does, stopped while the user steps."""
    from synth import session_messages, write_session

    path = write_session(tmp_path / "long.jsonl", session_messages(1500, avg_tool_chars=3000, seed=7),
                         header={"window": 32000})
    app = app_for(path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.screen
        await until(pilot, lambda: _measuring_child() is not None, timeout=60)
        pid = _measuring_child()
        await until(pilot, lambda: _state_and_nice(pid)[1] == 19, timeout=10)   # once it has started
        for i in range(6):
            await pilot.press("left" if i % 2 else "right")
            await pilot.pause(0.07)
        await until(pilot, lambda: _state_and_nice(pid)[0] == "T", timeout=5)   # stopped
        assert screen.fidelity is None
        await measured(pilot, timeout=300)
        assert _measuring_child() is None
        log = read_session(path)
        expected = replay(log, policy_for("breakwater", log, None))
        assert screen.fidelity.tally() == expected.tally()
        assert screen.fidelity.recall_at(screen.turn) == expected.recall_at(screen.turn)
