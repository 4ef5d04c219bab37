"""Opening the workbench headless in tests: the real app from the real factory, a hermetic config."""

from __future__ import annotations

import argparse
from pathlib import Path

from breakwater.cli.core import read_session, resolve_policy, sample_path
from breakwater.ui.app import BreakwaterApp, make_app
from breakwater.ui.config import UISettings
from breakwater.ui.widgets.inspector import Inspector
from breakwater.ui.widgets.message_list import MessageList


def app_for(name_or_path: str | Path = "long-refactor.jsonl", *, turn: int | None = None,
            settings: UISettings | None = None, **policy_args) -> BreakwaterApp:
    path = Path(name_or_path)
    if not path.exists():
        path = sample_path(str(name_or_path))
    log = read_session(path)
    ns = argparse.Namespace(policy=None, preset=policy_args.get("preset"), window=policy_args.get("window"))
    return make_app(log, resolve_policy(ns, log), turn=turn, settings=settings or UISettings(),
                    counter=policy_args.get("counter", "exact"), window_source=ns.window_source)


async def until(pilot, condition, timeout: float = 30.0) -> None:
    """Let the app run (workers included) until `condition()` holds."""
    waited = 0.0
    while not condition():
        if waited >= timeout:
            raise AssertionError("the app did not get there in time")
        await pilot.pause(0.05)
        waited += 0.05


async def select_row(pilot, row: int) -> None:
    """Select `row` in the message list and wait until the inspector shows it."""
    screen = pilot.app.screen
    screen.query_one(MessageList).select_index(row)
    await until(pilot, lambda: screen.query_one(Inspector).index == row)


async def ready(pilot, turn: int | None = None) -> None:
    """Until the request of `turn` (default: whatever turn the screen is at) is on screen."""
    screen = pilot.app.screen
    await until(pilot, lambda: screen.detail is not None and screen.detail.view.turn == (turn or screen.turn))


async def measured(pilot, timeout: float = 120.0) -> None:
    """Until the request is on screen and the fidelity gauge has its figures (a snapshot must not
    catch it half-way)."""
    await ready(pilot)
    screen = pilot.app.screen
    await until(pilot, lambda: screen.fidelity is not None, timeout)
    await pilot.pause()


def screen_text(app: BreakwaterApp) -> str:
    """What the terminal shows, as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())
