"""The workbench survives a write to a closed pipe; the print-only commands end quietly on one.

`chat` runs as a real process on a real terminal (a pty) against a scripted server on 127.0.0.1 whose
window (16,000) is smaller than the session's (128,000): the agent grows the session turn after turn,
the provider rejects the request as too long, and the background measurement of the facts each
request carries is stopped and started again as the log grows (its process goes away while a thread
still writes to it). With the default SIGPIPE action the app died of it, exit 141, no word."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent_support import KEY, VALID_SUMMARY, is_summary_request
from support.fake_openai import FakeOpenAIServer, Reply, ScriptedToolCall
from support.request_checks import heuristic_tokens


SMALL_WINDOW = 16_000
from breakwater.cli.core import sample_path


def responder(body):
    messages = body["messages"]
    if is_summary_request(body):
        return Reply(text=VALID_SUMMARY)
    tokens = heuristic_tokens(messages)
    if tokens > SMALL_WINDOW:
        return Reply.context_length_exceeded(SMALL_WINDOW, tokens)
    tools = 0
    for m in reversed(messages):
        if m["role"] == "user":
            break
        tools += m["role"] == "tool"
    if tools < 4:
        seed = len(messages)
        code = f"import random; random.seed({seed}); print(' '.join(str(random.random()) for _ in range(3000)))"
        return Reply.calls(ScriptedToolCall("bash", {"command": f'python3 -c "{code}"'}))
    return Reply(text="Done with this part.")


def entries(workspace: Path) -> int:
    logs = list((workspace / ".agent" / "sessions").glob("*.jsonl"))
    return sum(1 for _ in open(logs[0], "rb")) if logs else 0


def drain(master: int, seconds: float, proc: subprocess.Popen) -> None:
    """Read what the app draws (a terminal that is not read blocks its writer) for `seconds`."""
    import select

    end = time.monotonic() + seconds
    while time.monotonic() < end and proc.poll() is None:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                os.read(master, 65536)
            except OSError:
                return


def test_chat_outlives_a_context_length_error_and_the_measurement_it_restarts(tmp_path):
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (home / "config.toml").write_text("retry_base_s = 0.01\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    env.update(HOME=str(home), OPENAI_API_KEY=KEY, BREAKWATER_CONFIG=str(home / "config.toml"), TERM="xterm-256color",
               COLUMNS="120", LINES="40")
    server = FakeOpenAIServer(responder=responder, strict=False, api_key=KEY).start()
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "breakwater", "chat", "--base-url", server.base_url,
                             "--model", "fake-model", "--window", "128000", "--yes", "--sandbox", "none"],
                            cwd=workspace, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    try:
        deadline = time.monotonic() + 60
        while not list((workspace / ".agent" / "sessions").glob("*.jsonl")) and time.monotonic() < deadline:
            drain(master, 0.5, proc)
        after_rejection = 0
        for k in range(10):
            before = entries(workspace)
            os.write(master, f"part {k}\r".encode())
            deadline = time.monotonic() + 60
            while entries(workspace) < before + 10 and time.monotonic() < deadline and proc.poll() is None:
                drain(master, 0.5, proc)
            drain(master, 2.0, proc)
            assert proc.poll() is None, f"the workbench died (exit {proc.returncode}) after prompt {k}"
            if any(r.reply is not None and r.reply.status == 400 for r in server.chat_requests):
                after_rejection += 1
                if after_rejection == 3:
                    break
        rejected = [r for r in server.chat_requests if r.reply is not None and r.reply.status == 400]
        assert rejected, "the provider never rejected a request: the scenario did not happen"
        os.write(master, b"\x11")   # ctrl+q
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            drain(master, 0.5, proc)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
        server.stop()


def test_print_only_commands_end_quietly_on_a_closed_pipe():
    # `simulate | head -1`: the reader goes away after one line; the command ends at once, no word on stderr
    shell = subprocess.run(f"{sys.executable} -m breakwater simulate {sample_path()} "
                           f"--counter heuristic | head -1", shell=True, capture_output=True, text=True,
                           timeout=120)
    assert shell.returncode == 0 and shell.stdout.count("\n") == 1
    assert shell.stderr == ""


def test_only_print_only_commands_take_the_default_sigpipe_action():
    import argparse

    from breakwater.cli import quiet_pipe

    assert quiet_pipe("simulate") and quiet_pipe("tokens") and quiet_pipe("*")
    for command in ("chat", "replay", "browse", "run", None):
        assert not quiet_pipe(command)
    assert not quiet_pipe("eval", argparse.Namespace(judge=True, dask=None))
