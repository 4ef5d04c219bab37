"""The workbench driven by keys, as a user drives it: what is on screen and what was posted."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from textual.widgets import Static
from ui_support import app_for, ready, screen_text, select_row, until

from breakwater.core.simulate import view_at
from breakwater.core.log.tokens import heuristic_message as heuristic_message
from breakwater.ui.config import UISettings
from breakwater.ui.messages import SimulationReady, TurnChosen, ViewReady
from breakwater.ui.widgets.gauges import Gauges
from breakwater.ui.widgets.inspector import Inspector, InspectorHead
from breakwater.ui.widgets.message_list import SUMMARY_ROW, MessageList
from breakwater.ui.widgets.text_pane import TextPane
from breakwater.ui.widgets.timeline import Timeline

SIZE = (160, 48)


def posted(kind):
    seen = []

    def hook(message):
        if isinstance(message, kind):
            seen.append(message)
    return seen, hook


async def test_opens_at_the_last_turn_and_steps():
    app = app_for("long-refactor.jsonl")
    views, hook = posted(ViewReady)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.detail is not None)
        last = app.replay.turns
        assert screen.detail.view.turn == last
        assert not views   # the simulation's worker built the first request: no second worker
        await ready(pilot)
        text = screen_text(app)
        assert f"turn {last} / {last}" in text
        assert "hard zone" in text            # long-refactor ends past the hard limit
        await pilot.press("left")
        await ready(pilot, last - 1)
        assert f"turn {last - 1} / {last}" in screen_text(app)
        assert views[-1].turn == last - 1
        await pilot.press("home")
        await ready(pilot, 1)
        assert "turn 1 /" in screen_text(app) and "safe zone" in screen_text(app)
        await pilot.press("end")
        await ready(pilot, last)
        # go to turn N by typing it
        await pilot.press("g", "4", "2", "enter")
        await ready(pilot, 42)
        expected = view_at(app.replay.log, app.replay.policy, 42)
        assert screen.detail.view == expected
        assert f"sent {expected.sent_tokens:,}" in screen_text(app).replace("≈", "")


async def test_gauges_show_the_counts_and_limits():
    app = app_for("long-refactor.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        d = app.screen.detail
        text = screen_text(app)
        p = app.replay.policy
        assert f"soft limit {p.soft_limit:,}" in text and f"hard limit {p.hard_limit:,}" in text
        assert f"exact {d.exact_tokens:,} (o200k_base)" in text
        # the provider's figure for this very request (the transcript records it): 37.10
        assert f"API {app.replay.stats(d.view.turn).billed_tokens:,} (recorded at this turn)" in text
        assert f"without compaction ≈{d.view.raw_tokens:,}" in text
        # the fit (its start here; whole in the x view) and where the window came from
        assert d.calibration.describe()[:30] in text and "(session)" in text
        assert app.screen.query_one(Gauges).detail is d


async def test_a_request_sent_as_is_saves_nothing():
    """Turn 10 of long-refactor is sent whole, counted by tiktoken (16,440) where raw was the
    heuristic (17,521): the gauge said "saved 1,081 (6%)" and a prefix of 18,796, larger than the request.
    Both are one unit now (core/log/accounting.py): without compaction is what is sent."""
    app = app_for("long-refactor.jsonl", turn=10)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, 10)
        await until(pilot, lambda: "sent as is" in screen_text(app))
        d = app.screen.detail
        assert d.view.counted == "exact" and d.view.sent_tokens == d.view.raw_tokens
        text = screen_text(app)
        assert "saved ≈0 (0%)" in text
        assert 0 < d.view.stable_prefix_tokens <= d.view.sent_tokens
        assert f"cache-stable prefix ≈{d.view.stable_prefix_tokens:,}" in text


async def test_filters_and_search_narrow_the_list():
    app = app_for("long-refactor.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        lst = app.screen.query_one(MessageList)
        everything = len(lst.rows)
        await pilot.press("r")                # role: system
        assert {lst.messages[i].role for i in lst.rows if i != SUMMARY_ROW} == {"system"}
        await pilot.press("r", "r")           # role: assistant
        assert {lst.messages[i].role for i in lst.rows if i != SUMMARY_ROW} == {"assistant"}
        assert "role=assistant" in screen_text(app)
        await pilot.press("escape")
        assert len(lst.rows) == everything
        await pilot.press("e", "e")           # kind: the first kind after "edited at all"
        kinds = {k for i in lst.rows if i != SUMMARY_ROW for k in app.screen.detail.kinds(lst.messages[i].id)}
        assert lst.filter.kind in kinds and lst.rows
        await pilot.press("escape")
        await pilot.press("slash", *"InvoiceRepository", "enter")
        assert lst.rows and all("invoicerepository" in (lst.messages[i].content.lower() + " ".join(
            c.arguments.lower() for c in lst.messages[i].tool_calls)) for i in lst.rows if i != SUMMARY_ROW)
        assert len(lst.rows) < everything


async def test_inspector_shows_raw_and_sent_with_spans():
    app = app_for("long-refactor.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.screen
        lst = screen.query_one(MessageList)
        d = screen.detail
        # a message that was snipped or masked in this request (not summarized away)
        target = next(i for i in range(d.history) if any(e.spans and e.kind in ("snipped", "masked")
                                                        for e in d.edits_by_id.get(lst.messages[i].id, ())))
        await select_row(pilot, target)
        inspector = screen.query_one(Inspector)
        raw = screen.query_one("#inspector-raw", TextPane)
        sent = screen.query_one("#inspector-sent", TextPane)
        msg = lst.messages[target]
        assert msg.content in raw.text
        assert d.sent_by_id[msg.id].content in sent.text
        assert raw.spans and all(kind in ("snipped", "masked", "folded", "microcompacted") for _, _, kind in raw.spans)
        head = screen_text(app)
        edit = d.edits_by_id[msg.id][0]
        assert f"stage {edit.stage}" in head and f"{edit.tokens_before:,} → {edit.tokens_after:,}" in head
        assert inspector.index == target


async def test_summary_row_lists_what_it_covers_and_jumps():
    app = app_for("long-refactor.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.screen
        lst = screen.query_one(MessageList)
        summary = screen.detail.summary
        await select_row(pilot, SUMMARY_ROW)
        assert f"covers {len(summary.covered)} messages" in screen_text(app)
        assert screen.query_one("#inspector-sent", TextPane).text == summary.message.content
        await pilot.press("enter")
        assert lst.messages[lst.selected_index].id == summary.covered[0]
        await pilot.press("enter")            # and back to the summary
        assert lst.selected_index == SUMMARY_ROW


async def test_the_message_a_summary_was_joined_into_says_so():
    # long-refactor at its last turn: the summary is joined to the first user message (turns alternate),
    # which is sent at ten times its logged size; its row and its inspector must say why
    app = app_for("long-refactor.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.screen
        lst = screen.query_one(MessageList)
        d = screen.detail
        survivor = next(i for i, m in enumerate(lst.messages) if m.id in d.joined)
        msg = lst.messages[survivor]
        assert d.sent_tokens(msg) > 5 * heuristic_message(msg)
        assert "merged" in d.kinds(msg.id)
        await select_row(pilot, survivor)
        head = screen.query_one(InspectorHead).draw().plain
        assert "the deep-compaction summary joined to this message so that turns alternate" in head
        assert f"tokens {heuristic_message(msg):,} → {d.sent_tokens(msg):,}" in head
        row = next(line for line in screen_text(app).splitlines() if line.lstrip("│ ").startswith(f"{survivor} "))
        assert "merge" in row


async def test_broken_lines_are_notified_with_their_numbers(tmp_path):
    src = (app_for.__globals__["sample_path"]("npm-install-flood.jsonl")).read_text().splitlines()
    src.insert(3, "{not json")
    src.insert(6, "[1, 2")
    bad = tmp_path / "broken.jsonl"
    bad.write_text("\n".join(src) + "\n")
    app = app_for(bad)
    notes, hook = posted(SimulationReady)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await ready(pilot)
        texts = [n.message for n in app._notifications]
        assert any("line 4" in t and "line 7" in t for t in texts), texts
        assert notes  # and the rest loaded and simulated


async def test_theme_toggles_and_help_lists_keys_and_colours():
    app = app_for("sanitizer-mess.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.theme == "breakwater-dark"
        await pilot.press("t")
        assert app.theme == "breakwater-light"
        await pilot.press("f1")
        await until(pilot, lambda: "keys and colours" in screen_text(app))
        console = Console(width=160, record=True, file=io.StringIO())
        for static in app.screen.query(Static):
            console.print(static.content)
        text = console.export_text()
        assert "replay.next" in text and "snipped" in text and "soft zone" in text and "[ui.keymap]" in text
        await pilot.press("escape")
        await pilot.pause(0.2)
        assert "replay.next" not in screen_text(app)


@pytest.mark.parametrize("name", ["sanitizer-mess.jsonl", "mixed-zh-en.jsonl", "nginx-error-log.jsonl"])
async def test_every_sample_opens(name):
    app = app_for(name)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        assert "turn" in screen_text(app)


async def test_keys_are_remapped_from_the_config_by_binding_id(tmp_path, monkeypatch):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[ui]\ntheme = "breakwater-light"\n[ui.keymap]\n"replay.prev" = "p"\n')
    monkeypatch.setenv("BREAKWATER_CONFIG", str(cfg))
    app = app_for("sanitizer-mess.jsonl", settings=UISettings.load())
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        assert app.theme == "breakwater-light"
        last = app.screen.turn
        await pilot.press("p")
        await ready(pilot, last - 1)
        await pilot.press("left")             # the old key no longer steps
        await pilot.pause(0.2)
        assert app.screen.turn == last - 1
        assert ("replay.prev", "p") in {(b[0], b[1]) for b in app.binding_table()}


async def test_timeline_click_scrubs_and_space_plays():
    app = app_for("npm-install-flood.jsonl")
    chosen, hook = posted(TurnChosen)
    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        await ready(pilot)
        timeline = app.screen.query_one(Timeline)
        await pilot.click(Timeline, offset=(9, 3))     # the first column of the chart
        await ready(pilot, 1)
        assert chosen and chosen[-1].turn == 1 == timeline.turn
        # 2×: a turn every 0.25 s, so the 21 turns take 5 s. At 16× a loaded machine saw the last turn
        # before the second space, playback had ended by itself, and that space started it again
        await pilot.press("plus")
        await pilot.press("space")
        await until(pilot, lambda: app.screen.turn >= 4)
        assert "playing" in screen_text(app)
        await pilot.press("space")
        stopped = app.screen.turn
        await until(pilot, lambda: "paused" in screen_text(app))
        await pilot.pause(0.3)
        assert app.screen.turn == stopped


async def test_every_action_is_in_the_command_palette():
    app = app_for("sanitizer-mess.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        for want in ("Next", "Prev", "Turn…", "Play", "Search", "Role", "Kind", "Spill", "Help", "Theme"):
            assert any(t.startswith(want + " (") for t in titles), (want, titles)


async def test_a_10_mb_tool_output_opens_in_the_inspector(tmp_path):
    from synth import session_messages, tool_output, write_session

    from breakwater.core.log.message import Message
    msgs = session_messages(40, avg_tool_chars=500, seed=9)
    big = next(i for i, m in enumerate(msgs) if m.role == "tool")
    import random
    msgs[big] = Message(msgs[big].id, "tool", tool_output(random.Random(1), 10_000_000),
                        tool_call_id=msgs[big].tool_call_id, turn=msgs[big].turn)
    app = app_for(write_session(tmp_path / "big.jsonl", msgs))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen = app.screen
        await select_row(pilot, big)
        raw = screen.query_one("#inspector-raw", TextPane)
        assert len(raw.text) >= 10_000_000 and raw.virtual_size.height > 100_000
        raw.focus()
        await pilot.press("end")                 # the last rows are drawn on demand, like the first
        await until(pilot, lambda: raw.scroll_offset.y > 100_000)


def repaints(widget) -> list[tuple]:
    """From now on, the regions each repaint of `widget` asks for (none: the whole widget)."""
    calls: list[tuple] = []
    repaint = widget.refresh

    def seen(*regions, **kwargs):
        calls.append(regions)
        return repaint(*regions, **kwargs)

    widget.refresh = seen
    return calls


async def test_the_cursor_moving_in_a_scrolled_list_repaints_the_two_rows_on_screen():
    """The terminal shows only what is repainted: the rows asked for must be where the old and the
    new cursor are on screen, not where they would be had the list not scrolled."""
    app = app_for("long-refactor.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        lst = app.screen.query_one(MessageList)
        lst.focus()
        await pilot.press("ctrl+home", "pagedown", "pagedown", "pagedown")
        await pilot.pause()
        top, row = lst.scroll_offset.y, lst.cursor
        assert top > 0 and row - top > 2
        calls = repaints(lst)
        await pilot.press("up")
        assert (lst.cursor, lst.scroll_offset.y) == (row - 1, top)
        assert {r.y for regions in calls for r in regions if r.height == 1} == {row - top, row - 1 - top}


async def test_a_step_repaints_every_row_on_screen_whose_content_changed():
    app = app_for("long-refactor.jsonl")
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        screen, lst = app.screen, app.screen.query_one(MessageList)
        lst.focus()
        await pilot.press("ctrl+end")   # the newest messages: a step back changes them
        await pilot.pause()
        height, partial, changed_rows = lst.size.height, 0, 0
        for _ in range(6):
            before = [list(lst.render_line(y)) for y in range(height)]
            calls = repaints(lst)
            turn = screen.turn
            await pilot.press("left")
            await ready(pilot, turn - 1)
            del lst.refresh
            changed = {y for y in range(height) if list(lst.render_line(y)) != before[y]}
            if all(calls):   # no call repainted the whole list
                partial += 1
                assert changed <= {y for regions in calls for r in regions for y in range(r.y, r.y + r.height)}
            changed_rows += len(changed)
        assert partial and changed_rows
