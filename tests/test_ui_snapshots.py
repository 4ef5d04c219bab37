"""SVG snapshots of the main screens at fixed sizes, in both themes (pytest-textual-snapshot).

Generated on Python 3.11.7 with textual 8.2.8 (both pinned); regenerate with
`make snapshots` after a deliberate change to the look, and review the SVGs in the diff.
"""

from __future__ import annotations

import pytest
from ui_support import app_for, measured

from breakwater.ui.config import UISettings


def _app(theme: str, name: str = "long-refactor.jsonl", turn: int | None = None):
    return app_for(name, turn=turn, settings=UISettings(theme=theme))


@pytest.mark.parametrize("theme", ["breakwater-dark", "breakwater-light"])
@pytest.mark.parametrize("size", [(100, 30), (200, 60)])
def test_replay_screen(snap_compare, theme, size):
    assert snap_compare(_app(theme), terminal_size=size, run_before=measured)


@pytest.mark.parametrize("theme", ["breakwater-dark", "breakwater-light"])
def test_inspector_on_a_snipped_tool_result(snap_compare, theme):
    async def select(pilot):
        await measured(pilot)
        await pilot.press("e", "e", "down")   # the first kind present, then one row down
        await pilot.pause(0.2)

    assert snap_compare(_app(theme, "npm-install-flood.jsonl"), terminal_size=(160, 48), run_before=select)


@pytest.mark.parametrize("theme", ["breakwater-dark", "breakwater-light"])
def test_help_screen(snap_compare, theme):
    async def open_help(pilot):
        await measured(pilot)
        await pilot.press("f1")
        await pilot.pause(0.2)

    assert snap_compare(_app(theme, "sanitizer-mess.jsonl"), terminal_size=(120, 40), run_before=open_help)


@pytest.mark.parametrize("theme", ["breakwater-dark", "breakwater-light"])
def test_chat_screen_without_a_model(snap_compare, theme, tmp_path, monkeypatch):
    from breakwater.agent.config import load_config
    from breakwater.ui.chat_app import ChatApp

    (tmp_path / "config.toml").write_text("")
    env = {"BREAKWATER_CONFIG": str(tmp_path / "config.toml")}
    app = ChatApp(load_config({"workspace": tmp_path}, env=env), configured=False,
                  settings=UISettings(theme=theme), counter="heuristic")

    async def opened(pilot):
        await measured(pilot)
        app.clear_notifications()
        app.screen.query_one("#chat-input").cursor_blink = False   # it has the focus: a blink makes it random
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(160, 48), run_before=opened)

