"""`breakwater browse` in a real terminal (tmux), as a person meets it (issue 35 item 7): a session
far larger than the ones a user opens every day is loaded in a thread the app does not wait for, the
title says how much of it is read, and ctrl+q ends the process at once in the middle of the load.

No part is stubbed: the real command in a real terminal, a real 270 MB session on disk, a real load."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed "
                                "(scripts/install_tmux.sh installs it)")

MESSAGES = 3_000_000   # ~270 MB: 4-5 s to read on this machine when quiet, longer under load


def write_large_session(path) -> int:
    """A native session of MESSAGES short messages, written line by line without a JSON encoder per
    message (2 s, not 25)."""
    path.parent.mkdir(parents=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"type": "session", "id": "large", "version": 1, "created": "2026-12-01T00:00:00Z",
                             "model": "gpt-4o", "window": 128_000}) + "\n")
        turn = 1
        for i in range(0, MESSAGES, 2):
            fh.write(f'{{"type":"message","id":"m{i:07d}","turn":{turn},"role":"user","content":"msg {i}"}}\n'
                     f'{{"type":"message","id":"m{i + 1:07d}","turn":{turn},"role":"assistant",'
                     f'"content":"done {i}"}}\n')
            turn += 1
    return path.stat().st_size


class Terminal:
    """One command in a detached tmux session of its own server (tests may run side by side)."""

    def __init__(self, command: list[str], cwd, env: dict[str, str], size=(120, 30)):
        self.socket = f"bw-test-{uuid.uuid4().hex[:8]}"
        env_args = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        # the server starts from this process's environment: COLUMNS and LINES set by the test runner
        # would size the app, not the terminal it runs in
        clean = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}
        subprocess.run(["tmux", "-L", self.socket, "-f", "/dev/null", "new-session", "-d", "-x", str(size[0]),
                        "-y", str(size[1]), "-c", str(cwd), *env_args, *command], check=True, env=clean)

    def screen(self) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, "capture-pane", "-p"], capture_output=True, text=True)
        return done.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "-L", self.socket, "send-keys", *keys], check=True)

    def wait_for(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.screen())
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(f"{pattern!r} not on screen after {timeout} s:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


def test_quitting_in_the_middle_of_a_large_sessions_load_ends_the_process_at_once(tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    size = write_large_session(work / ".agent/sessions/20261201-large.jsonl")
    ended = tmp_path / "ended"
    # the command's end is written by the shell that ran it: the moment the process is gone
    # (written aside and renamed: the file appears whole, never empty while `date` writes it)
    command = ["sh", "-c", f'"{sys.executable}" -m breakwater browse; date +%s.%N > "{ended}.part"; '
                           f'mv "{ended}.part" "{ended}"']
    env = {"HOME": str(home), "TERM": "xterm-256color", "PYTHONDONTWRITEBYTECODE": "1"}
    terminal = Terminal(command, work, env)
    try:
        terminal.wait_for(r"1 session in 1 project", timeout=30)
        terminal.keys("Enter")
        # the title says the size and how much is read, counting up, before the load ends
        first = terminal.wait_for(r"opening 20261201-large\.jsonl \(([\d.]+) MB\)… (\d+)% read, \d+ s — ctrl\+q quits",
                                  timeout=20)
        assert first.group(1) == f"{size / 1e6:.1f}"
        later = terminal.wait_for(rf"opening 20261201-large\.jsonl \([\d.]+ MB\)… (?!{first.group(2)}%)(\d+)% read",
                                  timeout=20)
        assert int(later.group(1)) > int(first.group(2))
        assert int(later.group(1)) < 100, "the load ended before ctrl+q could be pressed in the middle of it"
        pressed = time.time()
        terminal.keys("C-q")
        deadline = time.monotonic() + 10
        while not ended.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ended.exists(), f"still running 10 s after ctrl+q:\n{terminal.screen()}"
        took = float(ended.read_text()) - pressed
        assert took < 2.5, f"ctrl+q took {took:.1f} s to end the process while a large session loaded"
    finally:
        terminal.close()
