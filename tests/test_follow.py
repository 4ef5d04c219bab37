"""Following a transcript its agent is still writing (issue 25): a writer process appends a real
transcript line by line, at varying speeds and with lines split over two writes; the reader never
reports a half-written line, and the workbench grows with the file."""

import json
import subprocess
import sys
import time

import pytest

from breakwater.cli.core import resolve_policy
from breakwater.formats import load_session
from breakwater.formats.follow import Follower, own_compaction
from breakwater.ui.app import make_app
from breakwater.ui.config import UISettings
from support.transcripts import REAL
from ui_support import screen_text, until

SUBAGENT = REAL / "claude-code" / "agenticprimer_v2.0.76_subagent_a0294d5.jsonl"
SIZE = (160, 48)

# appends SRC to DST line by line: pauses of 0, 1 and 20 ms in turn, and every fifth line written in
# two parts 30 ms apart (an agent flushing a long line); waits for "go" on stdin before each line
# when asked to step
WRITER = r"""
import sys, time
src, dst, step = sys.argv[1], sys.argv[2], sys.argv[3] == "step"
lines = open(src, "rb").read().splitlines(keepends=True)
with open(dst, "ab", buffering=0) as out:
    for i, line in enumerate(lines):
        if step:
            sys.stdin.readline()
        if i % 5 == 2 and len(line) > 10:
            out.write(line[: len(line) // 2]); time.sleep(0.03); out.write(line[len(line) // 2:])
        else:
            out.write(line)
        time.sleep((0, 0.001, 0.02)[i % 3])
        if step:
            print(i, flush=True)
"""


def writer(src, dst, step=False):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(src), str(dst), "step" if step else "run"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_a_growing_transcript_is_read_whole_lines_only(tmp_path):
    dst = tmp_path / SUBAGENT.name
    proc = writer(SUBAGENT, dst)
    follower = Follower(dst)
    seen, sizes = 0, []
    try:
        while True:
            done = proc.poll() is not None
            log = follower.read() if dst.exists() else None
            if log is not None:
                assert log.issues == [], [str(i) for i in log.issues]   # never a broken last line
                assert len(log.entries) >= seen
                seen = len(log.entries)
                sizes.append(seen)
            if done:
                break
            time.sleep(0.002)
    finally:
        proc.wait(timeout=30)
        follower.close()
    whole = load_session(SUBAGENT)
    final = follower.read() or load_session(dst)
    assert [e.to_record() for e in final.entries] == [e.to_record() for e in whole.entries]
    assert len(sizes) > 10   # it was seen growing, not only at the end


def test_a_line_split_over_two_writes_is_waited_for(tmp_path):
    lines = SUBAGENT.read_bytes().splitlines(keepends=True)
    dst = tmp_path / SUBAGENT.name
    dst.write_bytes(b"".join(lines[:20]))
    follower = Follower(dst)
    first = follower.read()
    with open(dst, "ab") as fh:
        fh.write(lines[20][:40])
    assert follower.read() is None            # half a line: nothing new, nothing broken
    with open(dst, "ab") as fh:
        fh.write(lines[20][40:])
    grown = follower.read()
    assert grown is not None and grown.issues == [] and len(grown.entries) >= len(first.entries)
    assert grown.path == dst


def test_the_agents_own_compaction_point():
    log = load_session(SUBAGENT)
    own = own_compaction(log, 128_000)
    assert (own.agent, own.at) == ("Claude Code", 167_000)
    assert "83%" in own.closeness(139_000)   # of 167,000
    assert "would have compacted" in own.closeness(170_000)


@pytest.mark.asyncio
async def test_the_workbench_grows_with_the_file_and_stays_at_the_newest_turn(tmp_path):
    lines = SUBAGENT.read_bytes().splitlines(keepends=True)
    dst = tmp_path / SUBAGENT.name
    dst.write_bytes(b"".join(lines[:30]))
    follower = Follower(dst)
    log = follower.read()
    import argparse

    policy = resolve_policy(argparse.Namespace(policy=None, preset=None, window=None), log)
    app = make_app(log, policy, counter="heuristic", settings=UISettings(), follower=follower)
    src_rest = tmp_path / "rest.jsonl"
    src_rest.write_bytes(b"".join(lines[30:]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.detail is not None)
        start = screen.replay.turns
        assert "following: newest turn" in screen_text(app)
        assert "Claude Code auto-compacts at 167,000" in screen_text(app)
        proc = writer(src_rest, dst, step=True)
        try:
            for _ in range(12):    # twelve lines, one at a time
                proc.stdin.write("go\n")
                proc.stdin.flush()
                proc.stdout.readline()
            await until(pilot, lambda: screen.replay.turns > start and screen.turn == screen.replay.turns
                        and screen.detail is not None and screen.detail.view.turn == screen.turn, 10)
            grown = screen.replay.turns
            # the user steps back: the view stays there while the file grows
            await pilot.press("left")
            assert not screen.follow
            held = screen.turn
            for _ in range(25):
                proc.stdin.write("go\n")
                proc.stdin.flush()
                proc.stdout.readline()
            await until(pilot, lambda: screen.replay.turns > grown, 10)
            await pilot.pause(0.3)
            assert screen.turn == held and "paused at turn" in screen_text(app)
            await pilot.press("end")   # follows again
            await until(pilot, lambda: screen.follow and screen.turn == screen.replay.turns, 10)
        finally:
            proc.stdin.close()
            proc.kill()
            proc.wait()
        assert "your policy (" in screen_text(app)


def test_following_a_file_not_written_yet_waits_for_its_first_whole_line(tmp_path):
    dst = tmp_path / SUBAGENT.name     # the agent has not created it yet
    proc = writer(SUBAGENT, dst)
    said = []
    log = Follower(dst).first(lambda: said.append(True), poll=0.01)
    proc.wait(timeout=30)
    assert log.issues == [] and log.entries and said == [True]


def followed(dst, lines: int | None = None, src=SUBAGENT):
    """The workbench following `dst`, which holds the first `lines` lines of `src` (the subagent
    transcript): (app, log)."""
    import argparse

    dst.write_bytes(b"".join(src.read_bytes().splitlines(keepends=True)[:lines]))
    follower = Follower(dst)
    log = follower.read()
    policy = resolve_policy(argparse.Namespace(policy=None, preset=None, window=None), log)
    return make_app(log, policy, counter="heuristic", settings=UISettings(), follower=follower), log


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(100, 30), (120, 40)])
async def test_what_your_policy_does_stays_on_screen_when_narrow(tmp_path, size):
    app, _ = followed(tmp_path / SUBAGENT.name)
    async with app.run_test(size=size) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.detail is not None and "your policy (" in screen_text(app))
        line = next(x for x in screen_text(app).splitlines() if "your policy (" in x)
        assert line.lstrip().startswith(f"at turn {screen.turn} your policy (")


@pytest.mark.asyncio
async def test_a_replaced_or_truncated_file_is_said_on_screen(tmp_path):
    lines = SUBAGENT.read_bytes().splitlines(keepends=True)
    dst = tmp_path / SUBAGENT.name
    app, log = followed(dst, 40)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.detail is not None)
        dst.write_bytes(b"".join(lines[:10]))               # truncated in place
        await until(pilot, lambda: any("truncated" in str(n.title) for n in app._notifications), 10)
        await until(pilot, lambda: len(screen.replay.log.entries) < len(log.entries), 10)
        other = tmp_path / "other.jsonl"
        other.write_bytes(b"".join(lines[:20]))
        other.replace(dst)                                  # another file under its name (mv)
        await until(pilot, lambda: any("replaced" in str(n.title) for n in app._notifications), 10)
        # and the status line says it, before the rest of its line
        await until(pilot, lambda: any(line.lstrip().startswith(f"{dst.name} was replaced by another file")
                                       for line in screen_text(app).splitlines()), 10)


@pytest.mark.asyncio
async def test_an_edit_made_while_following_stays_in_effect_as_the_file_grows(tmp_path):
    """A pin made on a followed transcript goes to its overlay; the next lines the agent writes must
    not rebuild the replay from the file alone (the title said "1 edit" while the request was sent
    without it)."""
    from ui_support import select_row

    lines = SUBAGENT.read_bytes().splitlines(keepends=True)
    dst = tmp_path / SUBAGENT.name
    app, log = followed(dst, 30)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.detail is not None)
        await select_row(pilot, 1)
        pinned = screen.messages[1].id
        await pilot.press("P")
        await until(pilot, lambda: any(e.type == "pin" for e in screen.replay.log.events), 10)
        with open(dst, "ab") as fh:
            fh.write(b"".join(lines[30:60]))
        await until(pilot, lambda: len(screen.replay.log.messages) > len(log.messages), 10)
        await until(pilot, lambda: screen.detail is not None and screen.replay.simulation is not None, 30)
        assert [e.get("message_id") for e in screen.replay.log.events if e.type == "pin"] == [pinned]
        assert screen.replay.recording is screen.recording   # the file as written, the overlay beside it


@pytest.mark.asyncio
async def test_each_line_of_a_claude_code_reply_shows_as_it_arrives(tmp_path):
    """Claude Code writes one block of a reply per line (thinking, text, each tool_use), all under one
    message id, and its tool results come later. Each line must show when it arrives: the reply grew
    without adding a message, and the follow screen waited for the tool result to redraw (37.5)."""
    ccl = REAL / "claude-code" / "ccl_v2.0.55_a7da6a22.jsonl"
    lines = ccl.read_bytes().splitlines(keepends=True)
    text_line, call_line = json.loads(lines[12]), json.loads(lines[13])
    assert text_line["message"]["id"] == call_line["message"]["id"]   # one reply, two lines
    thinking = {**text_line, "uuid": "thinking-1",
                "message": {**text_line["message"], "content": [
                    {"type": "thinking", "thinking": "Which tar members are links", "signature": "s"}]}}
    dst = tmp_path / ccl.name
    app, _ = followed(dst, 12, ccl)
    said = text_line["message"]["content"][0]["text"].split()[:4]
    call = call_line["message"]["content"][0]["name"]
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await until(pilot, lambda: screen.detail is not None)
        for line, shown in ((json.dumps(thinking).encode() + b"\n", "Which tar members are links"),
                            (lines[12], " ".join(said)),
                            (lines[13], f"→ {call}(")):
            with open(dst, "ab") as fh:
                fh.write(line)
            await until(pilot, lambda: shown in screen_text(app), 5)
        assert screen.messages[-1].role == "assistant" and screen.messages[-1].tool_calls
