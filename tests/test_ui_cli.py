"""`breakwater replay`: what cannot be opened is one line on stderr and a non-zero exit, before any
screen (the subprocess has no terminal: had the app started, it would not end like this)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from breakwater.cli.core import sample_path


def run(*args, env=None):
    return subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, env=env)


def empty(tmp):
    path = tmp / "empty.jsonl"
    path.write_text("")
    return path


@pytest.mark.parametrize("make", [lambda tmp: tmp / "missing.jsonl", lambda tmp: tmp, empty])
def test_unreadable_session_is_one_line(tmp_path, make):
    out = run("replay", str(make(tmp_path)))
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("breakwater: "), out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_turn_out_of_range_and_bad_workspace(tmp_path):
    out = run("replay", str(sample_path("sanitizer-mess.jsonl")), "--turn", "999")
    assert out.returncode == 2 and "--turn 999" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    out = run("replay", str(sample_path("sanitizer-mess.jsonl")), "--workspace", str(tmp_path / "nope"))
    assert out.returncode == 2 and "not a directory" in out.stderr


def test_bad_ui_config_is_one_line(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("[ui]\ntheme = 3\n")
    out = run("replay", str(sample_path("sanitizer-mess.jsonl")), env={**os.environ, "BREAKWATER_CONFIG": str(cfg)})
    assert out.returncode == 2 and "ui.theme" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_no_arguments_opens_the_workbench_on_the_bundled_sample_in_a_terminal(tmp_path):
    """`breakwater` alone, in a real pseudo-terminal, offline: the screen shows the sample; q quits."""
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    # a home and a folder with no sessions (with some, `breakwater` lists them: tests/test_browse.py)
    env = {**os.environ, "BREAKWATER_CONFIG": str(tmp_path / "none.toml"), "TERM": "xterm-256color",
           "OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "HOME": str(tmp_path)}
    (tmp_path / "none.toml").write_text("")
    proc = subprocess.Popen([sys.executable, "-m", "breakwater"], stdin=slave, stdout=slave, stderr=slave, env=env,
                            close_fds=True, cwd=tmp_path)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while b"long-refactor.jsonl" not in seen or b"turn 177" not in seen:
            assert time.monotonic() < deadline, seen[-2000:]
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                seen += os.read(master, 65536)
        os.write(master, b"q")
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
