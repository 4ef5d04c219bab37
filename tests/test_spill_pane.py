"""The spill pane in a tiny host app: real files in a real workspace, watched for real."""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

from support.spills import write_spill
from textual.app import App, ComposeResult

from breakwater.cli.core import read_session, resolve_policy, sample_path
from breakwater.tools.spill_index import human_size
from breakwater.ui.spill import SpillPane, SpillView
from breakwater.ui.spill import view as view_module
from breakwater.ui.spill.view import TAIL_LINES
from breakwater.ui.app import make_app
from breakwater.ui.config import UISettings

SIZE = (100, 20)


class Host(App):
    def __init__(self, workspace: Path, session_id: str | None = "s1"):
        super().__init__()
        self.workspace, self.session_id = workspace, session_id
        self.posted: list = []

    def compose(self) -> ComposeResult:
        yield SpillPane(self.workspace, self.session_id)


def screen_text(app: App) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def until(pilot, predicate, timeout: float = 10.0):
    """Let the workers run until `predicate()` holds; the test fails if it never does."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        await pilot.pause(0.02)


def spill_lines(workspace: Path, call_id: str, lines: list[str], session: str = "s1") -> Path:
    return write_spill(workspace, session, call_id, "".join(line + "\n" for line in lines).encode())


def hooked(app: Host):
    def hook(message):
        if isinstance(message, (SpillView.Opened, SpillView.StatusChanged)):
            app.posted.append(message)
    return hook


async def test_opens_the_newest_spill_file_at_its_tail(tmp_path):
    spill_lines(tmp_path, "call_old", ["old output"])
    time.sleep(0.01)
    path = spill_lines(tmp_path, "call_new", [f"row {i:05d}" for i in range(5000)])
    app = Host(tmp_path)
    async with app.run_test(size=SIZE, message_hook=hooked(app)) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.index is not None and view.index.has_head)
        await pilot.pause()
        text = screen_text(app)
        assert "row 04999" in text and "5,000" in text
        assert "row 00000" not in text
        assert "call_new" in text and "call_old" in text
        assert "following" in text
        app.query_one(SpillPane).focus()
        await pilot.pause()
        assert app.focused is view
        opened = [m for m in app.posted if isinstance(m, SpillView.Opened)]
        # It was shown from the tail alone, before the head was indexed.
        assert opened and opened[0].path == path and opened[0].lines == TAIL_LINES


async def test_follows_the_file_as_it_grows(tmp_path):
    path = spill_lines(tmp_path, "call_1", [f"first {i}" for i in range(50)])
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.index is not None)
        with path.open("a") as f:
            f.write("appended one\nappended two\npartial")
        await until(pilot, lambda: "partial" in screen_text(app))
        assert "appended two" in screen_text(app)
        with path.open("a") as f:
            f.write(" line completed\n")
        await until(pilot, lambda: "partial line completed" in screen_text(app))
        assert len(view.index) == 53 and view.following
        size = human_size(path.stat().st_size)
        await until(pilot, lambda: f"call_1  {size}" in screen_text(app))


async def test_scrolling_up_pauses_following_and_end_resumes_it(tmp_path):
    path = spill_lines(tmp_path, "call_1", [f"line {i}" for i in range(200)])
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.index is not None)
        view.focus()
        await pilot.pause()  # the first frame is painted and focus has moved before keys come
        await pilot.press("pageup")
        assert not view.following and "‖ paused" in screen_text(app)
        with path.open("a") as f:
            f.write("while paused\n")
        await until(pilot, lambda: view.index is not None and len(view.index) == 201)
        assert "while paused" not in screen_text(app)
        await pilot.press("G")
        await pilot.pause()
        assert view.following and "while paused" in screen_text(app)


async def test_jump_to_line(tmp_path):
    spill_lines(tmp_path, "call_1", [f"entry {i + 1}" for i in range(10_000)])
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.index is not None and view.index.has_head)
        view.focus()
        await pilot.pause()  # the first frame is painted and focus has moved before keys come
        await pilot.press("colon", *"1234", "enter")
        await pilot.pause()
        lines = screen_text(app).splitlines()
        row = next(line for line in lines if "entry 1234" in line)
        assert "1,234" in row
        assert not any("entry 1233" in line for line in lines)
        await pilot.press("colon", *"abc", "enter")
        await pilot.pause()
        assert "entry 1234" in screen_text(app)


async def test_search_forward_and_back_highlights_the_hit(tmp_path):
    lines = [f"line {i}" for i in range(3000)]
    lines[100] = "the NEEDLE is here"
    lines[2500] = "another needle"
    spill_lines(tmp_path, "call_1", lines)
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.index is not None and view.index.has_head)
        view.focus()
        await pilot.pause()  # the first frame is painted and focus has moved before keys come
        await pilot.press("g", "slash", *"needle", "enter")
        await until(pilot, lambda: view.hit is not None)
        assert "the NEEDLE is here" in screen_text(app)
        assert view.index.line_at(view.hit.offset) == 100
        await pilot.press("n")
        await until(pilot, lambda: view.index.line_at(view.hit.offset) == 2500)
        assert "another needle" in screen_text(app)
        await pilot.press("n")
        await until(pilot, lambda: view.index.line_at(view.hit.offset) == 100)
        assert "wrapped" in screen_text(app)
        await pilot.press("N")
        await until(pilot, lambda: view.index.line_at(view.hit.offset) == 2500)
        row = next(y for y in range(view.size.height) if "another needle" in view.render_line(y).text)
        styles = {seg.text: seg.style for seg in view.render_line(row)}
        current = view.get_component_rich_style("spill-view--current-match")
        assert styles["needle"].bgcolor == current.bgcolor
        await pilot.press("slash", *"Needle", "enter")
        await until(pilot, lambda: "not found" in screen_text(app))


async def test_a_new_spill_file_appears_in_the_list(tmp_path):
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert "No spill file open" in screen_text(app)
        spill_lines(tmp_path, "call_late", ["late output"])
        await until(pilot, lambda: "late output" in screen_text(app))
        assert "call_late" in screen_text(app)


async def test_binary_and_long_lines_are_shown_safely(tmp_path):
    write_spill(tmp_path, "s1", "call_bin", b"\x1b[2J\x1b]0;pwned\x07 \xff\xfe\n" + b"z" * 3_000_000 + b"\nend\n")
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.index is not None)
        await pilot.pause()
        text = screen_text(app)
        assert "\x1b" not in text and "␛[2J␛]0;pwned␇" in text
        assert "2.9 MB more" not in text  # the cut marker is past the right edge
        view.scroll_to(x=view.max_scroll_x, animate=False)
        await pilot.pause()
        assert "more" in screen_text(app)


async def test_all_sessions_and_switching_session(tmp_path):
    spill_lines(tmp_path, "call_a", ["from a"], session="sa")
    spill_lines(tmp_path, "call_b", ["from b"], session="sb")
    app = Host(tmp_path, session_id=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "sa/call_a" in screen_text(app) and "sb/call_b" in screen_text(app))
        pane = app.query_one(SpillPane)
        pane.show_session(tmp_path, "sa")
        await until(pilot, lambda: "from a" in screen_text(app))
        assert "call_b" not in screen_text(app)


async def test_a_rewritten_file_is_indexed_again(tmp_path):
    path = spill_lines(tmp_path, "call_1", ["secret sk-123 here", "more"])
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.index is not None)
        tmp = path.with_name(path.name + ".redact-tmp")
        tmp.write_text("secret [REDACTED] here\nmore\n")
        tmp.replace(path)
        await until(pilot, lambda: "[REDACTED]" in screen_text(app))
        assert "sk-123" not in screen_text(app)


async def test_jump_and_search_asked_while_the_head_is_indexed_wait_for_it(tmp_path, monkeypatch):
    spill_lines(tmp_path, "call_1", [f"entry {i + 1}" for i in range(3 * TAIL_LINES)])
    gate = threading.Event()
    real_scan = view_module.scan_line_ends

    def gated_scan(fd, start, stop, **kwargs):
        if start == 0:  # the head: held back until the test has asked for the jump
            gate.wait(10)
        yield from real_scan(fd, start, stop, **kwargs)

    monkeypatch.setattr(view_module, "scan_line_ends", gated_scan)
    app = Host(tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            view = app.query_one(SpillView)
            await until(pilot, lambda: view.index is not None)
            assert not view.index.has_head and f"{2 * TAIL_LINES + 1}" not in screen_text(app)
            view.focus()
            await pilot.pause()  # the first frame is painted and focus has moved before keys come
            await pilot.press("colon", *"42", "enter")
            await pilot.pause()
            assert view.status.message == "line 42 once indexing is done"
            assert "once indexing is done" in screen_text(app)
            gate.set()
            await until(pilot, lambda: "entry 42" in screen_text(app))
            assert "entry 6000" not in screen_text(app) and "indexing" not in screen_text(app)
    finally:
        gate.set()


async def test_without_a_workspace_the_pane_says_how_to_name_one(tmp_path):
    for workspace, said in ((None, "No workspace known"), (tmp_path / "elsewhere", "is not on this machine")):
        app = Host(workspace)
        async with app.run_test(size=(160, 20)) as pilot:
            await pilot.pause()
            assert said in screen_text(app) and "pass --workspace DIR" in screen_text(app)


async def test_a_narrow_pane_puts_the_list_above_the_file(tmp_path):
    spill_lines(tmp_path, "call_1", ["narrow"])
    app = Host(tmp_path)
    async with app.run_test(size=(60, 20)) as pilot:
        await until(pilot, lambda: "narrow" in screen_text(app))
        pane = app.query_one(SpillPane)
        file_list, view = pane.query_one("#spill-files"), pane.query_one(SpillView)
        await until(pilot, lambda: pane.has_class("-narrow") and file_list.region.bottom <= view.region.y)
        assert view.region.width == pane.region.width


async def test_the_newest_file_is_followed_until_one_is_picked(tmp_path):
    first = spill_lines(tmp_path, "call_1", ["first output"])
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.path == first)
        time.sleep(0.01)
        second = spill_lines(tmp_path, "call_2", ["second output"])
        await until(pilot, lambda: view.path == second and "second output" in screen_text(app))
        app.query_one(SpillPane).query_one("#spill-files").focus()
        await pilot.press("end", "enter")
        await until(pilot, lambda: view.path == first)
        time.sleep(0.01)
        spill_lines(tmp_path, "call_3", ["third output"])
        await until(pilot, lambda: "call_3" in screen_text(app))
        assert view.path == first


async def test_in_the_workbench_s_shows_the_sessions_spill_files_and_follows_one(tmp_path):
    log = read_session(sample_path("long-refactor.jsonl"))
    path = spill_lines(tmp_path, "call_pytest", [f"test_{i} PASSED" for i in range(500)], session=log.id)
    policy = resolve_policy(argparse.Namespace(policy=None, preset=None, window=None), log)
    app = make_app(log, policy, workspace=tmp_path, settings=UISettings(), counter="heuristic")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("s")
        view = app.screen.query_one(SpillView)
        await until(pilot, lambda: view.index is not None and "test_499 PASSED" in screen_text(app))
        assert app.focused is view
        with path.open("a") as f:
            f.write("1 failed, 499 passed\n")
        await until(pilot, lambda: "1 failed, 499 passed" in screen_text(app))


async def test_the_spill_pane_takes_the_timelines_place_and_leaves_the_inspector_whole(tmp_path):
    from breakwater.ui.widgets.inspector import Inspector
    from breakwater.ui.widgets.timeline import Timeline

    log = read_session(sample_path("long-refactor.jsonl"))
    spill_lines(tmp_path, "call_pytest", [f"test_{i} PASSED" for i in range(50)], session=log.id)
    policy = resolve_policy(argparse.Namespace(policy=None, preset=None, window=None), log)
    for size in ((120, 40), (160, 48)):
        app = make_app(log, policy, workspace=tmp_path, settings=UISettings(), counter="heuristic")
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            inspector = app.screen.query_one(Inspector)
            tall = inspector.size.height
            await pilot.press("s")
            await pilot.pause()
            spill = app.screen.query_one(SpillPane)
            assert inspector.size.height >= 0.75 * tall, size   # it used to be left a third of its rows
            assert spill.size.width >= size[0] - 2 and spill.size.height >= 10
            assert not app.screen.query_one(Timeline).display
            await pilot.press("s")
            await pilot.pause()
            assert app.screen.query_one(Timeline).display and not spill.display


async def test_a_deleted_spill_file_is_said_gone(tmp_path):
    path = spill_lines(tmp_path, "call_1", ["soon gone"])
    app = Host(tmp_path)
    async with app.run_test(size=(160, 20)) as pilot:
        view = app.query_one(SpillView)
        await until(pilot, lambda: view.index is not None)
        path.unlink()
        await until(pilot, lambda: "call_1.log is gone" in screen_text(app))
        assert view.path is None and "soon gone" not in screen_text(app)
