"""Issue 27: what a hostile model can send through `run`, against the real CLI and a real server.

Each test is an attack of the issue: the run must answer the model with an error result (or
refuse), finish with exit code 0 and leave nothing a person reads holding a control sequence.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from agent_support import KEY, Script, load, serve
from support.fake_openai import Reply, ScriptedToolCall


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    env.update(HOME=str(home), BREAKWATER_CONFIG=str(home / "config.toml"), OPENAI_API_KEY=KEY)
    return env


@pytest.fixture
def dirs(tmp_path):
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (home / "config.toml").write_text('model = "fake-model"\nretry_base_s = 0.01\nsandbox = "auto"\n')
    return workspace, home


def run(dirs, script: Script, *extra: str, stdin: str = "") -> tuple[subprocess.CompletedProcess, object]:
    workspace, home = dirs
    with serve(script) as server:
        done = subprocess.run([sys.executable, "-m", "breakwater", "run", "--prompt", "go", "--workspace",
                               str(workspace), "--base-url", server.base_url, *extra],
                              env=cli_env(home), input=stdin, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    session = [line for line in done.stdout.splitlines() if line.startswith("session: ")]
    return done, load(Path(session[-1].removeprefix("session: ")))


# -- item 7: arguments that break the parser --------------------------------------------------------
@pytest.mark.parametrize("arguments,why", [
    ('{"TEXT": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ('{"TEXT": "a", "NUMBER": 1' + "0" * 5000 + "}", "a number of 5001 digits"),
    ('{"TEXT": "a", "NUMBER": 1e999}', "NUMBER must be a finite"),
], ids=["deep", "digits", "inf"])
@pytest.mark.parametrize("tool", ["read_file", "bash"])
def test_hostile_arguments_become_an_error_result(dirs, arguments, why, tool):
    number = "start_line" if tool == "read_file" else "timeout_s"
    arguments = arguments.replace("TEXT", "path" if tool == "read_file" else "command").replace("NUMBER", number)
    why = why.replace("NUMBER", number)
    script = Script([Reply.calls(ScriptedToolCall(tool, arguments)), Reply(text="done")])
    done, log = run(dirs, script, "--yes")
    (result,) = [m for m in log.messages if m.role == "tool"]
    assert result.content.startswith("Error: ") and why in result.content, result.content[:300]
    assert len(done.stdout) + len(done.stderr) < 5000
