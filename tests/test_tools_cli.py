"""`breakwater tool ...` as scripts call it: a real subprocess, real files."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest


def breakwater(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "breakwater", "tool", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


@pytest.fixture
def ws(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_bash_prints_what_the_model_sees_and_spills_everything(ws):
    p = breakwater("bash", "--workspace", str(ws), "--session-id", "s1", "--tool-call-id", "call_1",
                   "--", "seq 1 300000")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith("1\n2\n3\n")
    assert "\n80\n\n... [299600 lines truncated for context efficiency] ...\n\n299681\n" in out
    assert "\n300000\n\n[exit code: 0]\n" in out
    m = re.search(r'read_file\(path="([^"]+)", start_line=81, end_line=480\)', out)
    assert m and m.group(1) == ".agent/spill/s1/call_1.log"
    assert "299600 lines were truncated" in out
    expected = subprocess.run(["seq", "1", "300000"], capture_output=True, check=True).stdout
    assert (ws / m.group(1)).read_bytes() == expected


def test_bash_defaults_to_the_current_directory_and_a_fresh_call_id(ws):
    p = breakwater("bash", "--max-lines", "60", "--", "seq", "1", "100", cwd=ws)
    assert p.returncode == 0, p.stderr
    assert "... [40 lines truncated for context efficiency] ..." in p.stdout
    spills = list((ws / ".agent" / "spill" / "cli").glob("call_*.log"))
    assert len(spills) == 1
    assert spills[0].read_text() == "".join(f"{i}\n" for i in range(1, 101))


def test_read_file_and_write_file(ws):
    p = breakwater("write_file", "--workspace", str(ws), "notes/a.txt", "--content", "one\ntwo\nthree\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "Created notes/a.txt: 14 bytes, 3 lines.\n"
    p = breakwater("read_file", "--workspace", str(ws), "notes/a.txt", "--start-line", "2", "--end-line", "3")
    assert p.stdout == "[notes/a.txt: lines 2-3 of 3]\ntwo\nthree\n"


@pytest.mark.parametrize("args,reason", [
    (["read_file", "../etc/passwd"], "outside the workspace"),
    (["read_file", "missing.txt"], "no such file: missing.txt"),
    (["write_file", "/tmp/evil.txt", "--content", "x"], "outside the workspace"),
    (["bash"], "no command given"),
])
def test_errors_are_one_line_without_traceback(ws, args, reason):
    p = breakwater(*args[:1], "--workspace", str(ws), *args[1:])
    assert p.returncode != 0
    assert reason in p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert p.stdout == ""


def test_missing_workspace(tmp_path):
    p = breakwater("bash", "--workspace", str(tmp_path / "nope"), "--", "echo hi")
    assert p.returncode == 2
    assert p.stderr.strip() == f"breakwater tool: workspace '{tmp_path / 'nope'}' is not a directory"


def test_workspace_may_come_before_or_after_the_tool_name(tmp_path):
    import subprocess
    import sys
    for args in (["tool", "--workspace", str(tmp_path), "bash", "--", "pwd"],
                 ["tool", "bash", "--workspace", str(tmp_path), "--", "pwd"]):
        out = subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines()[0] == str(tmp_path.resolve())


def test_bash_options_may_follow_the_command_and_everything_after_dashes_is_the_command(ws, tmp_path):
    # the README's usage line puts the options last: they were passed to the command ("seq: extra operand")
    out = breakwater("bash", "seq 1 100000", "--workspace", str(ws), "--max-lines", "10", cwd=tmp_path)
    assert out.returncode == 0 and "seq:" not in out.stdout and "[exit code: 0]" in out.stdout
    assert (ws / ".agent" / "spill" / "cli").is_dir() and "100000 lines" in out.stdout
    after = breakwater("bash", "--workspace", str(ws), "--", "echo", "--workspace", "x", cwd=tmp_path)
    assert after.stdout.startswith("--workspace x\n")
    unknown = breakwater("bash", "--workspace", str(ws), "echo", "-n", "kept", cwd=tmp_path)
    assert unknown.stdout.startswith("kept")              # an option bash does not know is the command's
