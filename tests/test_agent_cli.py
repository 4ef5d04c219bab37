"""`breakwater run` as a real subprocess against the fake server (the issue's done-criterion).

The scripted model works through a task whose tool output floods and whose tool calls are
large enough to fill an 8,000-token window, so the run must cut and spill at the source,
compact in the soft zone, survive a deep compaction and keep every request inside the
window; a second run in the same workspace must start from the first one's project history.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from agent_support import (
    KEY,
    Script,
    agent_requests,
    events,
    files_containing,
    load,
    replayed_requests,
    serve,
    strip_volatile,
)
from support.fake_openai import Reply, ScriptedToolCall
from support.request_checks import heuristic_tokens

from breakwater.core.policy import preset
from breakwater.core.stages.summarize import SUMMARY_HEADER

WINDOW = 8000
SPILL_NOTICE = re.compile(r"saved to (\S+\.log);")


def breakwater(workspace: Path, home: Path, *args: str, prompt: str = "Do the task.", stdin=subprocess.DEVNULL,
               timeout: float = 180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    env.update(HOME=str(home), OPENAI_API_KEY=KEY, BREAKWATER_CONFIG=str(home / "config.toml"))
    return subprocess.run([sys.executable, "-m", "breakwater", "run", "--prompt", prompt, "--workspace",
                           str(workspace), *args], env=env, stdin=stdin, capture_output=True, text=True,
                          timeout=timeout)


def setup(tmp_path: Path, config: str = "") -> tuple[Path, Path]:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (home / "config.toml").write_text('model = "fake-model"\nretry_base_s = 0.01\n' + config)
    return workspace, home


def call(name: str, **arguments) -> Reply:
    return Reply.calls(ScriptedToolCall(name, arguments))


def read_spill(body) -> Reply:
    """The model reads a range of the spill file the last tool result named."""
    last_tool = [m for m in body["messages"] if m["role"] == "tool"][-1]
    path = SPILL_NOTICE.search(last_tool["content"]).group(1)
    return call("read_file", path=path, start_line=150_000, end_line=150_020)


def document(title: str) -> str:
    return "".join(f"{title} line {i}: " + "lorem ipsum dolor sit amet " * 2 + "\n" for i in range(1, 121))


def task_steps() -> list:
    return [
        call("bash", command="seq 1 300000"),
        read_spill,
        call("write_file", path="notes/part1.md", content=document("part one")),
        call("bash", command="wc -c notes/part1.md && seq 1 2000"),
        call("write_file", path="notes/part2.md", content=document("part two")),
        call("bash", command="cat notes/part1.md"),
        call("write_file", path="notes/part3.md", content=document("part three")),
        call("bash", command="ls -la notes && du -sh notes"),
        call("write_file", path="notes/part4.md", content=document("part four")),
        call("write_file", path="notes/README.md", content="Four parts, one per file.\n"),
        Reply(text="Done: notes/part1-4.md written and checked; the flood is in the spill file."),
    ]


def session_path(stdout: str) -> Path:
    line = stdout.strip().splitlines()[-1]
    assert line.startswith("session: "), stdout
    return Path(line[len("session: "):])


def test_a_headless_run_survives_floods_and_a_deep_compaction_and_feeds_the_next_session(tmp_path):
    workspace, home = setup(tmp_path)
    script = Script([*task_steps(), Reply(text="Second run: I see the earlier session.")])
    with serve(script, window=WINDOW) as server:
        first = breakwater(workspace, home, "--base-url", server.base_url, "--window", str(WINDOW), "--yes",
                           prompt="Write notes/part1-4.md and check the counter output.")
        assert first.returncode == 0, first.stderr
        # nothing but, where bubblewrap cannot run, the one line that says so
        assert [line for line in first.stderr.splitlines() if "bubblewrap is not usable" not in line] == []
        assert first.stdout.startswith("Done: notes/part1-4.md written")
        path = session_path(first.stdout)
        first_requests = len(agent_requests(server))

        second = breakwater(workspace, home, "--base-url", server.base_url, "--window", str(WINDOW), "--yes",
                            prompt="What did we do last time?")
        assert second.returncode == 0, second.stderr
        requests = agent_requests(server)
        assert server.problems == [] and script.problems == []

    log = load(path)
    session_id = log.header["id"]
    # every request within the window (the strict server refused none)
    assert all(r.reply.status == 200 for r in server.chat_requests)
    assert all(heuristic_tokens(r.messages) <= WINDOW for r in server.chat_requests)
    assert first_requests == 11

    # the flood was cut at the source and spilled in full
    flood = next(m for m in log.messages if m.role == "tool")
    assert flood.meta["source"]["dropped_lines"] > 299_000
    spill = workspace / flood.meta["source"]["spill"]
    assert spill.read_bytes() == "".join(f"{i}\n" for i in range(1, 300_001)).encode()
    sliced = [m for m in log.messages if m.role == "tool"][1]
    assert sliced.content.splitlines()[:2] == [f"[{flood.meta['source']['spill']}: lines 150000-150020 of 300000]",
                                               "150000"]
    assert (workspace / "notes" / "part4.md").read_text() == document("part four")

    # a deep compaction happened, and later requests carry its summary
    (compaction,) = events(log, "compaction")
    assert compaction.get("trigger") == "auto" and compaction.get("summarizer") == "llm:fake-model"
    assert len(script.summary_bodies) >= 1
    run1 = requests[:first_requests]
    carrying = [i for i, r in enumerate(run1) if any(SUMMARY_HEADER in (m.get("content") or "") for m in r.messages)]
    assert carrying and carrying == list(range(carrying[0], first_requests))
    assert heuristic_tokens(run1[carrying[0]].messages) < heuristic_tokens(run1[carrying[0] - 1].messages)

    # the log alone gives back every request of the run, compaction included
    sent = [strip_volatile(r.messages) for r in run1]
    assert replayed_requests(log, preset("breakwater").with_changes(window=WINDOW)) == sent

    # memory: the scribe's file, the project history, and the second run starts from it
    assert "[FILE] notes/part1.md" in (workspace / ".agent" / "MEMORY.md").read_text()
    project = (workspace / "PROJECT_MEMORY.md").read_text()
    assert f"## Session {session_id[:8]} (" in project
    system = requests[first_requests].messages[0]["content"]
    assert "[Project History]" in system and f"## Session {session_id[:8]} (" in system
    assert "Finish the scripted task in the workspace." in system  # the deep summary of session one

    # the key went over the wire, and nowhere else
    assert requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert files_containing(workspace, KEY) == [] and files_containing(home, KEY) == []


def test_without_yes_and_without_a_terminal_changes_are_denied(tmp_path):
    workspace, home = setup(tmp_path)
    script = Script([call("bash", command="touch created"), Reply(text="It was denied.")])
    with serve(script) as server:
        done = breakwater(workspace, home, "--base-url", server.base_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "It was denied."
    assert not (workspace / "created").exists()
    tool = next(m for m in load(session_path(done.stdout)).messages if m.role == "tool")
    assert tool.content.startswith("Denied: bash was not run") and "--yes" in tool.content


def test_an_unreachable_endpoint_is_one_line_on_stderr(tmp_path):
    workspace, home = setup(tmp_path, "max_retries = 1\n")
    done = breakwater(workspace, home, "--base-url", "http://127.0.0.1:9/v1", "--yes")
    assert done.returncode == 1 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("breakwater run: gave up after 2 failed attempts: connection error")
    assert "(session: " in lines[0]


def test_a_rejected_key_is_one_line_on_stderr(tmp_path):
    workspace, home = setup(tmp_path)
    script = Script([Reply(status=401, error={"message": "Incorrect API key provided", "type": "invalid_request_error",
                                              "param": None, "code": "invalid_api_key"})])
    with serve(script) as server:
        done = breakwater(workspace, home, "--base-url", server.base_url)
    assert done.returncode == 1
    assert done.stderr.startswith("breakwater run: HTTP 401: Incorrect API key provided")
    assert len(done.stderr.strip().splitlines()) == 1


def test_bad_settings_exit_2_with_one_line(tmp_path):
    workspace, home = setup(tmp_path, "window = 'large'\n")
    done = breakwater(workspace, home)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "window must be int" in done.stderr
    (home / "config.toml").write_text("")
    missing = breakwater(tmp_path / "nowhere", home)
    assert missing.returncode == 2 and "is not a directory" in missing.stderr


def test_on_a_terminal_the_user_is_asked_and_can_allow_a_call(tmp_path):
    import pty

    workspace, home = setup(tmp_path)
    script = Script([call("bash", command="touch allowed"), call("bash", command="touch refused"),
                     Reply(text="One of two.")])
    master, slave = pty.openpty()
    try:
        os.write(master, b"y\nn\n")   # typed ahead: the terminal buffers it until the agent asks
        with serve(script) as server:
            done = breakwater(workspace, home, "--base-url", server.base_url, stdin=slave)
    finally:
        os.close(master)
        os.close(slave)
    assert done.returncode == 0, done.stderr
    assert (workspace / "allowed").exists() and not (workspace / "refused").exists()
    assert done.stderr.count("Allow? [y/N]") == 2 and "The agent wants to run bash: touch allowed" in done.stderr
    refused = [m for m in load(session_path(done.stdout)).messages if m.role == "tool"][1]
    assert refused.content.startswith("Denied: bash was not run because the user declined it")
