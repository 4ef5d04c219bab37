"""SVG snapshots of the fidelity views (issue 12) in both themes: the lost-facts dialog with a loop
flag, and the summary review listing the facts a deep compaction would lose.

Regenerate after a deliberate change of look with `make snapshots` (every snapshot file), and review the SVGs.
"""

import pytest
from textual.widgets import TextArea
from ui_support import app_for, measured, until

from breakwater.ui.config import UISettings
from breakwater.ui.screens.dialogs import SummaryReviewScreen
from breakwater.ui.screens.fidelity import LostFactsScreen

SIZE = (160, 48)
THEMES = ("breakwater-dark", "breakwater-light")


@pytest.mark.parametrize("theme", THEMES)
def test_lost_facts_dialog(snap_compare, theme):
    app = app_for("long-refactor.jsonl", preset="seed-003", turn=139, settings=UISettings(theme=theme))

    async def opened(pilot):
        await measured(pilot)
        await pilot.press("f")
        await until(pilot, lambda: isinstance(app.screen, LostFactsScreen))
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZE, run_before=opened)


@pytest.mark.parametrize("theme", THEMES)
def test_summary_review_lists_what_it_would_lose(snap_compare, theme):
    app = app_for("long-refactor.jsonl", turn=50, settings=UISettings(theme=theme))

    async def opened(pilot):
        await measured(pilot)
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, SummaryReviewScreen))
        app.screen.query_one("#review-text", TextArea).cursor_blink = False  # else the picture is random
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZE, run_before=opened)
