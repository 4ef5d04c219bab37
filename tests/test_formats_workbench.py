"""Every real transcript opens in the workbench (headless, the real app) and steps back a turn;
the original agent's compaction is shown as recorded, not as one the policy decided."""

import pytest
from ui_support import app_for, ready, screen_text, until

from breakwater.ui.widgets.message_list import SUMMARY_ROW, MessageList
from support.transcripts import REAL

FILES = sorted(p for p in REAL.glob("*/*") if p.name != "SOURCES.md")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
async def test_every_real_transcript_opens_and_replays(path):
    app = app_for(path, counter="heuristic")
    async with app.run_test(size=(140, 40)) as pilot:
        await ready(pilot)
        last = app.screen.turn
        assert "turn" in screen_text(app)
        if last > 1:
            await pilot.press("left")
            await ready(pilot, last - 1)


async def test_the_agents_own_compaction_is_shown_as_recorded():
    app = app_for(REAL / "codex" / "agentsessions_codex_coverage_small.jsonl", counter="heuristic")
    async with app.run_test(size=(240, 40)) as pilot:
        await ready(pilot)
        app.screen.query_one(MessageList).select_index(SUMMARY_ROW)
        # the inspector follows the cursor after a short delay: a fixed pause misses it on a loaded machine
        await until(pilot, lambda: "trigger recorded" in screen_text(app))
        text = screen_text(app)
        assert "trigger recorded" in text and "summarizer codex" in text
