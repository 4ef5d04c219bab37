"""One provider figure per request (37.10): the session list's last API figure, the gauge's at the
last request and `simulate --json`'s for it are the same number, on every real transcript. The list
showed pi's large-session at 177,604 while the gauge showed the request before's 176,585."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pytest

from breakwater.cli.formats import write_native
from breakwater.formats import load_session
from breakwater.formats.sessions import find_sessions
from support.transcripts import REAL
from ui_support import app_for, ready, screen_text

FIXTURES = sorted(p for p in REAL.glob("*/*") if p.name != "SOURCES.md")
PLACES = {"claude-code": ".claude/projects/-src-x/{stem}.jsonl",
          "codex": ".codex/sessions/2026/08/03/rollout-2026-08-03T10-48-56-{stem}.jsonl",
          "pi": ".pi/agent/sessions/--src-x--/{stem}.jsonl"}


def listed(src, tmp_path):
    """`src` where browse finds it (its agent's place; as a Breakwater session for the agents browse
    has no place for): (the file, its FoundSession)."""
    home, work = tmp_path / "home", tmp_path / "work"
    place = PLACES.get(src.parent.name)
    if place:
        dst = home / place.format(stem=re.sub(r"\W", "-", src.stem))
        dst.parent.mkdir(parents=True)
        shutil.copy(src, dst)
    else:
        dst = work / ".agent" / "sessions" / f"{src.stem}.jsonl"
        dst.parent.mkdir(parents=True)
        with open(dst, "w", encoding="utf-8") as fh:
            write_native(load_session(src), fh)
    found = find_sessions(home, work)
    assert [s.path for s in found] == [dst]
    return dst, found[0]


@pytest.mark.parametrize("src", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name[:30]}")
async def test_the_list_the_gauge_and_simulate_json_give_one_api_figure(src, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path, session = listed(src, tmp_path)
    out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json", "--counter",
                          "heuristic"], capture_output=True, text=True, timeout=300, check=True,
                         env={**os.environ, "HOME": str(tmp_path / "home")}).stdout
    last = json.loads(out)["turns"][-1]
    # the request's own billed figure, else the latest the provider reported before it
    simulated = last.get("billed_tokens", last.get("api_tokens"))
    assert session.last_tokens == simulated
    app = app_for(path, counter="heuristic")
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot, last["turn"])
        gauge = next(line for line in screen_text(app).splitlines() if "API " in line and "heuristic" in line)
    shown = re.search(r"API (—|[\d,]+)( \(recorded at (this turn|turn \d+)\))?", gauge)
    assert shown, gauge
    if simulated is None:
        assert shown[1] == "—"
    else:
        assert int(shown[1].replace(",", "")) == simulated
        assert (shown[3] == "this turn") == ("billed_tokens" in last)
