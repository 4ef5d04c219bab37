"""The browser's rows and search (issues 37.7, 35.5, 35.7, 42): every session file a user has,
described by its title or first prompt, its start and end, its messages; names drawn visibly; files
that are no transcript left out; `/` finds words in names and messages with the turn of each hit;
a large session is said before it is loaded, and quitting while one loads ends the app at once."""

from __future__ import annotations

import json
import os
import shutil
import time

from textual.widgets import Input, OptionList

from breakwater.formats.sessions import find_sessions
from breakwater.ui.app import browse_app
from breakwater.ui.config import UISettings
from breakwater.ui.screens import browse
from breakwater.ui.screens.browse import BrowseScreen, ConfirmLargeScreen
from breakwater.ui.screens.replay import ReplayScreen
from support.transcripts import REAL
from test_browse import CLAUDE, fake_home
from ui_support import screen_text, until

SUBAGENT = REAL / "claude-code" / "agenticprimer_v2.0.76_subagent_a0294d5.jsonl"
HOSTILE = "\x1b]0;pwned\x07\x1b]52;c;ZWNobyBoaQ==\x07\x1b[5m\u202eevil\nsplit"


def claude_line(**fields) -> str:
    return json.dumps(fields) + "\n"


def hostile_home(tmp_path):
    home = tmp_path / "home"
    project = home / ".claude/projects/-evil"
    project.mkdir(parents=True)
    with open(project / f"{HOSTILE[:8].encode().hex()}.jsonl", "w") as fh:
        fh.write(claude_line(type="user", cwd="/src/" + HOSTILE, timestamp="2026-01-05T10:00:00Z",
                             message={"role": "user", "content": "first " + HOSTILE}))
        fh.write(claude_line(type="assistant", cwd="/src/" + HOSTILE, timestamp="2026-01-05T10:05:00Z",
                             message={"role": "assistant", "model": "m" + HOSTILE, "content": [{"type": "text",
                                      "text": "ok"}], "usage": {"input_tokens": 5}}))
    return home



async def test_a_hostile_project_model_and_prompt_reach_the_screen_as_pictures(tmp_path):
    home = hostile_home(tmp_path)
    found = find_sessions(home, tmp_path)
    assert len(found) == 1
    app = browse_app(found, UISettings())
    async with app.run_test(size=(200, 20)) as pilot:
        await until(pilot, lambda: app.screen.query(OptionList))
        text = screen_text(app)
        for bad in ("\x1b", "\x07", "\u202e"):
            assert bad not in text
        assert "␛]0;pwned␇" in text and "\ufffdevil" in text
        # the newline does not split a row: the heading and one row, each on one line
        rows = [line for line in text.splitlines() if "pwned" in line]
        assert len(rows) == 2 and all("evil␤split" in r for r in rows[:1])


def test_subagents_are_listed_and_files_that_are_no_transcript_are_not(tmp_path):
    home = tmp_path / "home"
    project = home / ".claude/projects/-src-agentic"
    (project / "a6214a01/subagents").mkdir(parents=True)
    shutil.copy(SUBAGENT, project / "a6214a01/subagents/agent-a0294d5.jsonl")
    shutil.copy(CLAUDE, project / "a6214a01.jsonl")
    (project / "notes.jsonl").write_text("this is a plain text file\nnamed .jsonl by mistake\n")
    (project / "blob.jsonl").write_bytes(b'{"a": 1}\n\x00\x01\x02' * 100)
    os.mkfifo(project / "pipe.jsonl")
    started = time.monotonic()
    found = find_sessions(home, tmp_path)
    assert time.monotonic() - started < 5   # the FIFO is not waited on
    names = sorted(s.path.name for s in found)
    assert names == ["a6214a01.jsonl", "agent-a0294d5.jsonl"]
    sub = next(s for s in found if s.parent)
    assert sub.parent == "a6214a01" and sub.project == "/Users/bln/play/agentic-primer"
    assert sub.started.startswith("2026-01-06T04:1") and sub.ended >= sub.started


def test_each_session_has_its_title_or_first_prompt_and_its_times(tmp_path):
    home, work = fake_home(tmp_path)
    found = {s.agent: s for s in find_sessions(home, work)}
    assert found["Claude Code"].title == "Claude Code warmup for deep-manifest project"   # its summary title
    assert found["Codex"].title == "List the files"                                        # the first prompt
    # "/mode" was pi's first user message: a command that switched a setting, not what the session is about
    assert found["pi"].title.startswith("read packages/coding-agent/docs/theme.md in full")
    assert found["Breakwater"].title.startswith("<pr_description> Consider the following PR description:")
    assert found["pi"].started == "2025-11-20T23:33:50.805Z" and found["pi"].ended.startswith("2025-11-21T02:14")


async def test_rows_say_messages_times_and_projects_their_days(tmp_path):
    home, work = fake_home(tmp_path)
    app = browse_app(find_sessions(home, work), UISettings())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await until(pilot, lambda: isinstance(app.screen, BrowseScreen) and len(screen.counts) == 5, 60)
        await pilot.pause()
        text = screen_text(app)
        assert "/Users/badlogic/workspaces/pi-mono  (1)  2025-11-20 – 2025-11-21" in text
        assert "2025-11-20 23:33–11-21 02:14" in text and "914 msgs" in text
        assert "/src/deep-manifest  (2)  2025-11-29" in text
        # every row is one line at 100 columns: nothing of a row reads as a heading
        assert all(len(line) <= 100 for line in text.splitlines())
        assert sum("msgs" in line for line in text.splitlines()) == 5


async def test_slash_finds_words_in_the_messages_with_the_turn_of_each_hit(tmp_path):
    home, work = fake_home(tmp_path)
    app = browse_app(find_sessions(home, work), UISettings())
    async with app.run_test(size=(160, 40)) as pilot:
        screen = app.screen
        await until(pilot, lambda: isinstance(app.screen, BrowseScreen))
        await pilot.press("slash")
        box = screen.query_one("#browse-search", Input)
        assert box.has_focus
        box.value = "Pix2Sky_TAN"   # in the astropy task's messages, past its title
        await pilot.pause()
        assert "0 sessions in 0 projects of 5 match by name" in screen_text(app)
        await pilot.press("enter")
        await until(pilot, lambda: screen.hits is not None, 60)
        await pilot.pause()
        text = screen_text(app)
        assert "1 session in 1 project of 5 match “Pix2Sky_TAN”" in text
        assert "found at turns 1, 3, 10, 13, 18, 21, 22, 32 …" in text
        # enter on the result opens the session at the first hit
        screen.query_one(OptionList).focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ReplayScreen) and app.screen.detail is not None, 60)
        assert app.screen.turn == 1
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, BrowseScreen))
        # filters: by model and by date, as you type
        box.focus()
        box.value = "model:opus"
        await pilot.pause()
        assert "2 sessions in 1 project of 5" in screen_text(app)
        box.value = "date:2025-11-20..2025-11-30 agent:pi"
        await pilot.pause()
        assert "1 session in 1 project of 5" in screen_text(app) and "read packages/coding" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert "5 sessions in 4 projects" in screen_text(app)


async def test_after_a_session_fails_to_open_the_header_no_longer_says_opening(tmp_path):
    home = tmp_path / "home"
    project = home / ".claude/projects/-src-x"
    project.mkdir(parents=True)
    (project / "odd.jsonl").write_text('{"what": 1}\n{"b": 2}\n')   # JSON, but of no agent
    app = browse_app(find_sessions(home, tmp_path), UISettings())
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, BrowseScreen))
        await pilot.press("enter")
        await until(pilot, lambda: any("cannot be opened" in str(n.title) for n in app._notifications), 30)
        await pilot.pause()
        assert "opening" not in screen_text(app).splitlines()[0]
        assert "1 session in 1 project" in screen_text(app).splitlines()[0]


async def test_a_session_larger_than_free_memory_is_said_before_it_is_loaded(tmp_path, monkeypatch):
    home, work = fake_home(tmp_path)
    monkeypatch.setattr(browse, "available_memory", lambda: 100_000)
    loads = []
    monkeypatch.setattr(browse, "load_session", lambda p: loads.append(p) or (_ for _ in ()).throw(OSError("x")))
    app = browse_app(find_sessions(home, work), UISettings())
    async with app.run_test(size=(120, 30)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, BrowseScreen))
        app.screen.workers.cancel_group(app.screen, "count")
        loads.clear()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmLargeScreen))
        assert "opening it takes about" in app.screen.text and "this machine has 100 KB free" in app.screen.text
        await pilot.press("n")
        await pilot.pause(0.5)
        assert loads == [] and isinstance(app.screen, BrowseScreen)


# quitting while a large session loads: tests/test_browse_terminal.py, a real load in a real terminal
