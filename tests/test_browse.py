"""`breakwater browse`: sessions found in a fake home laid out like real ones (HOME is the test's),
grouped by project, newest first, described from the ends of each file; enter opens one."""

import os
import shutil
import subprocess
import sys
import time

from textual.widgets import OptionList

from breakwater.formats import load_session
from breakwater.cli.formats import write_native
from breakwater.formats.sessions import by_project, find_sessions
from breakwater.ui.app import browse_app
from breakwater.ui.config import UISettings
from breakwater.ui.screens.replay import ReplayScreen
from support.transcripts import REAL
from ui_support import screen_text, until

CLAUDE = REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl"
CODEX = REAL / "codex" / "agentsessions_codex_coverage_small.jsonl"
PI = REAL / "pi" / "large-session.jsonl"


def fake_home(tmp_path):
    """A home with a session of each agent, and a workspace with one of Breakwater's own."""
    home, work = tmp_path / "home", tmp_path / "work"
    places = [
        (CLAUDE, home / ".claude/projects/-src-deep-manifest/a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl", 400),
        (CLAUDE, home / ".claude/projects/-src-deep-manifest/b0b0b0b0-facc-4fcd-8bab-f83c87862004.jsonl", 300),
        (CODEX, home / ".codex/sessions/2026/08/03/rollout-2026-08-03T10-48-56-019fc8be.jsonl", 200),
        (PI, home / ".pi/agent/sessions/--Users-badlogic-workspaces-pi-mono--/2025-11-20_d703a1a9.jsonl", 100),
    ]
    now = time.time()
    for src, dst, age in places:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
        os.utime(dst, (now - age, now - age))
    native = work / ".agent/sessions/20260101-own.jsonl"
    native.parent.mkdir(parents=True)
    with open(native, "w", encoding="utf-8") as fh:
        write_native(load_session(REAL / "mini-swe-agent" / "pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json"),
                     fh)
    os.utime(native, (now - 10, now - 10))
    return home, work


def test_sessions_are_found_in_each_agents_place_newest_first(tmp_path):
    home, work = fake_home(tmp_path)
    found = find_sessions(home, work)
    assert [s.agent for s in found] == ["Breakwater", "pi", "Codex", "Claude Code", "Claude Code"]
    by_agent = {s.path.name: s for s in found}
    claude = by_agent["a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl"]
    assert claude.project == "/src/deep-manifest" and claude.model == "claude-opus-4-5-20251101"
    assert claude.size == CLAUDE.stat().st_size
    pi = next(s for s in found if s.agent == "pi")
    assert pi.project == "/Users/badlogic/workspaces/pi-mono" and pi.model == "claude-sonnet-4-5"
    assert pi.last_tokens == 0 + 176585 + 1019   # input + cache read + cache write of the last reply
    codex = next(s for s in found if s.agent == "Codex")
    assert codex.project == "/tmp/repo"
    own = found[0]
    assert own.project == str(work)   # its header names no workspace: the one it was found in
    assert own.model == "deepseek/deepseek-chat" and own.last_tokens > 20_000
    groups = by_project(found)
    assert [len(g) for _, g in groups] == [1, 1, 1, 2]   # the two Claude Code sessions share a project


def test_an_empty_home_has_no_sessions_and_browse_says_where_it_looked(tmp_path):
    assert find_sessions(tmp_path, tmp_path) == []
    env = {**os.environ, "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "breakwater", "browse"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "~/.claude/projects" in r.stderr and "Traceback" not in r.stderr


async def test_the_browser_lists_by_project_and_enter_opens_a_session(tmp_path):
    home, work = fake_home(tmp_path)
    app = browse_app(find_sessions(home, work), UISettings())
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.screen.query(OptionList))
        text = screen_text(app)
        assert "5 sessions in 4 projects" in text
        assert text.index("/src/deep-manifest") > text.index("/Users/badlogic/workspaces/pi-mono")
        assert "claude-opus-4-5-20251101" in text and "last API 177,604" in text
        # the newest is highlighted; down moves to the next session (headings are passed over)
        await pilot.press("down")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.detail is not None, 60)
        assert app.replay.log.source_format == "pi"
        assert app.screen.replay.turns == app.replay.log.turn_count()


async def test_o_goes_back_from_an_opened_session_to_the_list(tmp_path):
    from breakwater.ui.screens.browse import BrowseScreen
    from breakwater.ui.screens.follow import FollowScreen

    home, work = fake_home(tmp_path)
    app = browse_app(find_sessions(home, work), UISettings())
    async with app.run_test(size=(200, 60)) as pilot:
        await until(pilot, lambda: app.screen.query(OptionList))
        assert "Sessions" not in screen_text(app).splitlines()[-1]   # nothing to go back to from the list
        await pilot.press("down", "enter")
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.detail is not None, 60)
        assert "o Sessions" in screen_text(app).splitlines()[-1]
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, BrowseScreen))
        assert "5 sessions in 4 projects" in screen_text(app) and "opening" not in screen_text(app)
        # the list is where it was: the next session opens, followed, and o comes back again
        await pilot.press("down", "F")
        await until(pilot, lambda: isinstance(app.screen, FollowScreen) and app.screen.detail is not None, 60)
        assert app.replay.log.source_format != "pi"
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, BrowseScreen))
        assert len(app.screen_stack) == 2   # the default screen and the list: nothing left open


async def test_one_session_in_one_project_is_said_so(tmp_path):
    home, work = fake_home(tmp_path)
    app = browse_app(find_sessions(home, work)[:1], UISettings())
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.screen.query(OptionList))
        assert "1 session in 1 project —" in screen_text(app)


async def test_f_in_the_browser_follows_the_session(tmp_path):
    from breakwater.ui.screens.follow import FollowScreen

    home, work = fake_home(tmp_path)
    app = browse_app(find_sessions(home, work), UISettings())
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: app.screen.query(OptionList))
        await pilot.press("down", "F")
        await until(pilot, lambda: isinstance(app.screen, FollowScreen) and app.screen.detail is not None, 60)
        assert "following: newest turn" in screen_text(app)
        assert "pi auto-compacts at" in screen_text(app)
