"""SVG snapshots of the session browser, the context view and follow mode (pytest-textual-snapshot),
at 100x30 and 200x60 in both themes. Regenerate with `make snapshots` after a deliberate change of look."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from ui_support import app_for, measured, ready

from breakwater.formats.follow import Follower
from breakwater.formats.sessions import find_sessions
from breakwater.ui.app import browse_app, make_app
from breakwater.core.policy import preset
from breakwater.ui.config import UISettings
from support.transcripts import REAL

SIZES = [(100, 30), (200, 60)]
THEMES = ["breakwater-dark", "breakwater-light"]


def _home(tmp: Path) -> Path:
    now = time.time()
    for src, dst, age in (
            (REAL / "claude-code/ccl_v2.0.55_a7da6a22.jsonl", ".claude/projects/-src-deep-manifest/a7da6a22.jsonl", 7200),
            (REAL / "codex/agentsessions_codex_coverage_small.jsonl", ".codex/sessions/2026/08/03/rollout-1.jsonl", 90000),
            (REAL / "pi/large-session.jsonl", ".pi/agent/sessions/--pi-mono--/2025-11-20_d703.jsonl", 600)):
        path = tmp / dst
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, path)
        os.utime(path, (now - age, now - age))
    return tmp


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES)
def test_session_browser(snap_compare, theme, size, tmp_path):
    home = _home(tmp_path)
    app = browse_app(find_sessions(home, home / "nowhere"), UISettings(theme=theme))
    assert snap_compare(app, terminal_size=size)


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize("size", SIZES)
def test_context_by_category(snap_compare, theme, size):
    async def open_context(pilot):
        await measured(pilot)
        await pilot.press("x")
        await pilot.pause()

    assert snap_compare(app_for("long-refactor.jsonl", settings=UISettings(theme=theme)), terminal_size=size,
                        run_before=open_context)


@pytest.mark.parametrize("theme", THEMES)
def test_follow_mode(snap_compare, theme, tmp_path):
    src = REAL / "claude-code/agenticprimer_v2.0.76_subagent_a0294d5.jsonl"
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"".join(src.read_bytes().splitlines(keepends=True)[:40]))
    follower = Follower(path)
    log = follower.read()
    app = make_app(log, preset("breakwater"), counter="heuristic", settings=UISettings(theme=theme), follower=follower)
    assert snap_compare(app, terminal_size=(200, 60), run_before=measured)
