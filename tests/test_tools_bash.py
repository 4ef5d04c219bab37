"""run_bash with real subprocesses: exit codes, streaming through the buffer, spill, timeouts."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from breakwater.tools.bash import run_bash
from breakwater.tools.workspace import Workspace


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


def process_gone(pid: int) -> bool:
    """Dead or a zombie waiting for init to reap it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(b")") + 2:].split()[0] == b"Z"


def wait_gone(pid: int, within: float = 3.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if process_gone(pid):
            return True
        time.sleep(0.02)
    return process_gone(pid)


def kill_if_alive(pid: int) -> None:
    if not process_gone(pid):
        os.kill(pid, signal.SIGKILL)


def test_exit_code_and_merged_output(ws):
    r = run_bash(ws, "echo out; echo err >&2; exit 7", tool_call_id="c1")
    assert r.content == "out\nerr\n\n[exit code: 7]"
    assert r.meta["exit_code"] == 7
    assert r.meta["timed_out"] is False
    assert r.meta["spill"] is None
    assert not (ws.root / ".agent/spill/session/c1.log").exists()


def test_runs_in_the_workspace(ws):
    (ws.root / "marker.txt").write_text("here")
    r = run_bash(ws, "pwd; cat marker.txt")
    assert r.content.split("\n")[:2] == [str(ws.root), "here"]


def test_no_output(ws):
    r = run_bash(ws, "true")
    assert r.content == "(no output)\n\n[exit code: 0]"


def test_flood_is_cut_and_spilled_exactly(ws):
    r = run_bash(ws, "seq 1 300000", session_id="s1", tool_call_id="call_1")
    head, marker, tail, trailer = r.content.split("\n\n")
    assert head.split("\n") == [str(i) for i in range(1, 81)]
    assert marker == "... [299600 lines truncated for context efficiency] ..."
    assert tail.split("\n") == [str(i) for i in range(299_681, 300_001)]
    expected = subprocess.run(["seq", "1", "300000"], capture_output=True, check=True).stdout
    spill = ws.root / ".agent/spill/s1/call_1.log"
    assert spill.read_bytes() == expected
    assert r.meta["spill"] == ".agent/spill/s1/call_1.log"
    assert (r.meta["total_lines"], r.meta["dropped_lines"], r.meta["total_bytes"]) == (300_000, 299_600, len(expected))
    assert r.meta["truncated_at_source"] is True
    assert trailer.split("\n")[0] == "[exit code: 0]"
    assert 'read_file(path=".agent/spill/s1/call_1.log", start_line=81, end_line=480)' in trailer


def test_binary_and_giant_line_output_spill_byte_identical(ws):
    blob = os.urandom(300_000) + b"x" * 5_000_000
    (ws.root / "blob.bin").write_bytes(blob)
    r = run_bash(ws, "cat blob.bin", tool_call_id="bin", max_line_bytes=1000)
    assert (ws.root / r.meta["spill"]).read_bytes() == blob
    assert r.meta["total_bytes"] == len(blob)
    assert r.meta["cut_lines"] >= 1
    assert len(r.content) < 500 * 1100


def test_timeout_kills_the_whole_process_group(ws):
    r = run_bash(ws, "sleep 100 & echo $! > grandchild.pid; echo started; sleep 100", timeout_s=1,
                 kill_grace_s=0.5)
    pid = int((ws.root / "grandchild.pid").read_text())
    try:
        assert r.meta["timed_out"] is True
        assert r.meta["exit_code"] == -signal.SIGTERM
        assert r.content.startswith("started\n\n[timed out after 1s; the command's process group was killed")
        assert wait_gone(pid), "the grandchild survived the timeout"
        assert 1 <= r.meta["duration_s"] < 5
    finally:
        kill_if_alive(pid)


def test_timeout_escalates_to_sigkill(ws):
    r = run_bash(ws, "trap '' TERM; sleep 100 & echo $! > gc.pid; while :; do sleep 0.05; done",
                 timeout_s=1, kill_grace_s=0.3)
    pid = int((ws.root / "gc.pid").read_text())
    try:
        assert r.meta["timed_out"] is True
        assert r.meta["exit_code"] == -signal.SIGKILL
        assert wait_gone(pid)
    finally:
        kill_if_alive(pid)


def test_background_job_holding_the_pipe_does_not_hang(ws):
    started = time.monotonic()
    r = run_bash(ws, "sleep 30 & echo $! > bg.pid; echo bg", timeout_s=20)
    pid = int((ws.root / "bg.pid").read_text())
    try:
        assert time.monotonic() - started < 5
        assert r.meta["exit_code"] == 0 and r.meta["timed_out"] is False
        assert r.content.startswith("bg\n\n[exit code: 0]\n[the command exited but background processes")
    finally:
        kill_if_alive(pid)


def test_closing_output_early_does_not_end_the_command(ws):
    r = run_bash(ws, "echo before; exec >&- 2>&-; sleep 0.5; touch done.txt; exit 4", timeout_s=10)
    assert r.meta["exit_code"] == 4
    assert (ws.root / "done.txt").exists()
    assert r.content == "before\n\n[exit code: 4]"


def test_spill_ids_cannot_escape(ws, tmp_path):
    r = run_bash(ws, "seq 1 1000", session_id="../../../evil", tool_call_id="/etc/passwd")
    spill = Path(ws.root / r.meta["spill"]).resolve()
    assert spill.is_relative_to(ws.root / ".agent" / "spill")
    assert not (tmp_path / "evil").exists()


@pytest.mark.parametrize("command", ["", "   ", "echo \x00"])
def test_bad_commands_are_messages(ws, command):
    r = run_bash(ws, command)
    assert r.is_error and r.content.startswith("Error: ")


def test_missing_workspace_is_a_message(tmp_path):
    r = run_bash(tmp_path / "nope", "echo hi")
    assert r.is_error and "not a directory" in r.content


def test_nonsense_sizes_are_messages(ws):
    r = run_bash(ws, "echo hi", max_lines=0)
    assert r.is_error and "max_lines" in r.content


def test_a_flood_of_long_lines_is_capped_in_bytes_at_the_source(ws):
    # issue 7 item 12: 100,000 lines of 3,000 bytes came back as 1.2 MB
    r = run_bash(ws, "yes \"$(printf 'x%.0s' $(seq 2999))\" | head -n 100000", session_id="s1", tool_call_id="wide")
    body, _, trailer = r.content.rpartition("\n\n[exit code: 0]")
    assert len(body.encode()) <= 30_000
    assert r.meta["total_lines"] == 100_000 and r.meta["total_bytes"] == 300_000_000
    shown_head = body.split("\n\n")[0].count("\n") + 1
    dropped = r.meta["dropped_lines"]
    assert f"{dropped} lines were truncated above (lines {shown_head + 1}-{shown_head + dropped})" in trailer
    assert (ws.root / r.meta["spill"]).stat().st_size == 300_000_000


def test_binary_output_notice_says_what_reads_it(ws):
    # issue 7 item 13: the notice sent the model to read_file, which refused binary
    r = run_bash(ws, "head -c 100000 /dev/zero; printf 'tail\\n'", tool_call_id="bin")
    assert r.meta["binary"] is True
    spill = r.meta["spill"]
    assert f'read_file(path="{spill}", offset=0, length=1024)' in r.content
    assert "start_line" not in r.content.split("[exit code: 0]")[1]
    from breakwater.tools.read_file import read_file
    view = read_file(ws, spill, offset=0, length=32)
    assert view.content.splitlines()[1] == "00000000  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|"
    tail = read_file(ws, spill, offset=100_000, length=16)
    assert "74 61 69 6c 0a" in tail.content and "|tail.|" in tail.content
