"""Issue 26 item 13: numbers with separators, counts with their plural and article, a name said once."""

from __future__ import annotations

import json

from ui_support import app_for, ready, screen_text, until

from breakwater.cli.core import sample_path
from breakwater.core.log.session_log import LoadIssue
from breakwater.core.log.words import article, grouped, plural
from breakwater.ui.widgets.inspector import Inspector
from breakwater.ui.widgets.message_list import MessageList


def test_counts_numbers_and_articles():
    assert plural(1, "fact") == "1 fact" and plural(19710, "message") == "19,710 messages"
    assert plural(2, "entry", "entries") == "2 entries"
    assert article("assistant message") == "an assistant message" and article("user message") == "a user message"
    assert article("hour") == "an hour" and article("tool result") == "a tool result"
    assert grouped("hard limit 27200; tool output > 3000 chars") == "hard limit 27,200; tool output > 3,000 chars"
    assert grouped("0.15 × window, m00123, 1,234, 12345.5, 999") == "0.15 × window, m00123, 1,234, 12345.5, 999"


async def test_the_workbench_says_its_figures_and_names_in_words(tmp_path):
    path = tmp_path / "untitled.jsonl"
    lines = sample_path("long-refactor.jsonl").read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header.pop("title")
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    app = app_for(path, turn=177, preset="breakwater", window=32000)
    async with app.run_test(size=(200, 60)) as pilot:
        await ready(pilot, 177)
        text = screen_text(app)
        assert "untitled.jsonl — untitled.jsonl" not in text and "untitled.jsonl" in text.splitlines()[0]
        lst = app.screen.query_one(MessageList)
        covered = len(app.screen.detail.summary.covered)
        assert f"covers {plural(covered, 'message')}" in text
        await pilot.press("f1")
        await until(pilot, lambda: type(app.screen).__name__ == "HelpScreen")
        app.screen.query_one("#help-body").scroll_end(animate=False)
        await pilot.pause(0.2)
        assert "an assistant message" in screen_text(app) and "a assistant" not in screen_text(app)
        await pilot.press("escape")
        masked = next(e for e in app.screen.detail.view.edits if e.threshold and any(c.isdigit() for c in e.threshold)
                      and e.kind != "summarized")
        lst.select_id(masked.message_id)
        await until(pilot, lambda: app.screen.query_one(Inspector).index == lst.selected_index)
        await pilot.pause(0.2)
        head = " ".join(screen_text(app).split())
        assert masked.threshold.split(";")[0].replace("22400", "22,400") in head and "22400" not in head


async def test_a_note_about_the_whole_file_names_no_line():
    app = app_for("long-refactor.jsonl", turn=3)
    app.replay.log.issues.append(LoadIssue("x.jsonl", 0, "the file holds 6 sessions: …"))
    app.replay.log.issues.append(LoadIssue("x.jsonl", 12, "bad JSON, skipped"))
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot, 3)
        note = next(n for n in app._notifications if n.severity == "warning")
        assert note.title == "1 line skipped or repaired; the rest loaded"
        assert str(note.message).splitlines() == ["the file holds 6 sessions: …", "line 12: bad JSON, skipped"]
