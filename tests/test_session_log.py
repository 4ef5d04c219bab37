"""Bad input is reported with its line number and the rest loads."""

import json
import subprocess
import sys

import pytest

from breakwater.core.message import Message
from breakwater.core.session_log import SessionLog, SessionLogError, load_native

HEADER = {"type": "session", "version": 1, "id": "s1", "model": "gpt-4o", "window": 32000}


def line(obj) -> bytes:
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode()


def msg(i, role="user", content="hi", **kw):
    return {"type": "message", "id": f"m{i:05d}", "role": role, "content": content, **kw}


def test_round_trip(tmp_path):
    log = SessionLog.create(tmp_path / "s.jsonl", {"model": "gpt-4o"})
    log.append(Message("m00000", "system", "sys"))
    log.append(Message("m00001", "user", "请帮我", turn=1, meta={"ts": "2026-11-29T10:00:00Z"}))
    log.close()
    again = load_native(tmp_path / "s.jsonl")
    assert [m.content for m in again.messages] == ["sys", "请帮我"]
    assert again.messages[1].meta == {"ts": "2026-11-29T10:00:00Z"}
    assert again.issues == []


def test_broken_lines_are_reported_and_the_rest_loads(tmp_path):
    path = tmp_path / "bad.jsonl"
    big = "x" * (50 * 1024 * 1024)
    data = (line(HEADER) + line(msg(0)) + b'{"type": "message", "id": "m00001", "role": \n'
            + line(msg(2)) + line(msg(3))[:-1] + line(msg(4))          # two objects glued on one line
            + line(msg(5, content="caf\xe9"))[:-1].replace("caf\\u00e9".encode(), b"caf\xe9") + b"\n"
            + line(msg(6, content=big))
            + b"[1, 2]\n"
            + b'{"type": "message", "id": "m00007", "role": "user", "content": "trunc')
    # the non-UTF-8 line: write raw latin-1 bytes inside a JSON string
    data = data.replace(line(msg(5, content="caf\xe9"))[:-1], b'{"type": "message", "id": "m00005", "role": "user", "content": "caf\xe9"}')
    path.write_bytes(data)
    log = load_native(path)
    ids = [m.id for m in log.messages]
    assert ids == ["m00000", "m00002", "m00003", "m00004", "m00005", "m00006"]
    assert len(log.messages[-1].content) == len(big)
    reasons = {i.line: i.reason for i in log.issues}
    assert "not valid JSON" in reasons[3]
    assert "2 JSON objects glued" in reasons[5]
    assert "not UTF-8" in reasons[6]
    assert "expected a JSON object" in reasons[8]
    assert "truncated last line" in reasons[9]
    assert all(str(path) in str(i) for i in log.issues)


@pytest.mark.parametrize("make", ["missing", "directory", "empty", "garbage"])
def test_unreadable_files_raise_one_clear_error(tmp_path, make):
    path = tmp_path / "x.jsonl"
    if make == "directory":
        path.mkdir()
    elif make == "empty":
        path.write_bytes(b"")
    elif make == "garbage":
        path.write_bytes(b"\x00\x01 not json at all\n")
    with pytest.raises(SessionLogError) as err:
        load_native(path)
    assert str(path) in str(err.value)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True, timeout=120)


def test_cli_reports_bad_lines_on_stderr_and_simulates_the_rest(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(line(HEADER) + line(msg(0, "system", "sys")) + line(msg(1)) + b"{oops\n"
                     + line(msg(2, "assistant", "done")) + line(msg(3)))
    out = run_cli("simulate", str(path), "--json", "--counter", "heuristic")
    assert out.returncode == 0
    assert "Traceback" not in out.stderr
    warnings = out.stderr.strip().splitlines()
    assert len(warnings) == 1 and f"{path}:4:" in warnings[0]
    assert len(json.loads(out.stdout)["turns"]) == 1


@pytest.mark.parametrize("target", ["missing", "directory"])
def test_cli_unreadable_input_exits_non_zero_with_one_line(tmp_path, target):
    path = tmp_path / "nope.jsonl"
    if target == "directory":
        path.mkdir()
    for cmd in (["simulate", str(path)], ["tokens", str(path), "--json"]):
        out = run_cli(*cmd)
        assert out.returncode != 0
        assert len(out.stderr.strip().splitlines()) == 1
        assert "Traceback" not in out.stderr and str(path) in out.stderr
