"""Hostile lines and fields in a session file (issue 8 items 6 and 7): each is one warning that
names its line, the line is skipped or the field defaulted, the rest loads, and no command
prints a traceback."""

import json
import subprocess
import sys

import pytest

from breakwater.core.log.session_log import load_native
from breakwater.formats import load_session

HEADER = {"type": "session", "version": 1, "id": "s1", "model": "gpt-4o", "window": 32000}


def line(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)


def msg(i, role="user", content="hi", **kw):
    return line({"type": "message", "id": f"m{i:05d}", "turn": 1, "role": role, "content": content, **kw})


NESTED = "[" * 100_000 + "]" * 100_000
BAD_LINES = {
    "nested arrays": (NESTED, "nested too deeply"),
    "turn NaN": ('{"type": "message", "id": "x1", "turn": NaN, "role": "user", "content": "a"}', "turn nan"),
    "turn 1e999999": ('{"type": "message", "id": "x1", "turn": 1e999999, "role": "user", "content": "a"}',
                      "turn inf"),
    "5,000-digit turn": ('{"type": "message", "id": "x1", "turn": ' + "9" * 5000 + ', "role": "user", "content": "a"}',
                         "more than 4300 digits"),
    "5,000-digit number in broken JSON": ('{"type": "message", "role": "user", "n": ' + "9" * 5000 + ', }',
                                          "not valid JSON (Expecting property name"),
    "call with a numeric id and a string function": (
        '{"type": "message", "id": "x1", "turn": 1, "role": "assistant", "content": "",'
        ' "tool_calls": [{"id": 5, "function": "bash"}]}', "function is a string"),
    "compaction covering lots": ('{"type": "compaction", "covered": "lots"}', "compaction"),
    "compaction with a summary covering lots": (
        '{"type": "compaction", "id": "e1", "summary": "s", "covered": "lots", "trigger": "manual"}',
        "covered \"lots\" not whole numbers, defaulted to 0"),
    "lone surrogate": ('{"type": "message", "id": "x1", "turn": 1, "role": "user", "content": "a\\ud800b"}',
                       "lone surrogate"),
    "unknown role": ('{"type": "message", "id": "x1", "turn": 1, "role": "robot", "content": "a"}', 'role "robot"'),
    "null line": ("null", "got null"),
    "string tool_calls": ('{"type": "message", "id": "x1", "turn": 1, "role": "assistant", "content": "a",'
                          ' "tool_calls": "bash"}', "tool_calls is a string"),
    "text in meta.source counts": (
        '{"type": "message", "id": "x1", "turn": 1, "role": "tool", "tool_call_id": "c", "content": "a",'
        ' "meta": {"source": {"total_lines": "many", "total_bytes": [1]}}}', "total_lines, total_bytes"),
}


def session_with(bad: str) -> str:
    return "\n".join([line(HEADER), msg(0, "system", "sys"), msg(1), bad, msg(2, "assistant", "done"), msg(3)]) + "\n"


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_one_warning_names_the_line_and_the_rest_loads(tmp_path, case):
    bad, words = BAD_LINES[case]
    path = tmp_path / "s.jsonl"
    path.write_text(session_with(bad), encoding="utf-8")
    log = load_native(path)
    assert [str(i).split(": ", 1)[0] for i in log.issues] == [f"{path}:4"]
    assert words in log.issues[0].reason
    ids = [m.id for m in log.messages]
    assert ids[:2] == ["m00000", "m00001"] and ids[-2:] == ["m00002", "m00003"]
    for m in log.messages:
        m.content.encode("utf-8")  # every text can be written and printed


def test_defaults_are_usable(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(session_with(BAD_LINES["turn NaN"][0]) + session_with(BAD_LINES["call with a numeric id and a "
                                                                                  "string function"][0]))
    log = load_native(path)
    by_id = {m.id: m for m in log.messages}
    assert by_id["x1"].turn == 1  # NaN: the turn of its place (before the first reply)
    calls = [m for m in log.messages if m.tool_calls]
    assert calls and calls[0].tool_calls[0].id == "5" and calls[0].tool_calls[0].name == "bash"
    surrogate = tmp_path / "u.jsonl"
    surrogate.write_text(session_with(BAD_LINES["lone surrogate"][0]))
    assert load_native(surrogate).messages[2].content == "a\ufffdb"


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "breakwater", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_view_warns_once_and_never_prints_a_traceback(tmp_path, case):
    path = tmp_path / "s.jsonl"
    path.write_text(session_with(BAD_LINES[case][0]), encoding="utf-8")
    out = run_cli("simulate", str(path), "--view", "2")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    warnings = out.stderr.strip().splitlines()
    assert len(warnings) == 1 and f"{path}:4:" in warnings[0], out.stderr
    json.loads(out.stdout)


def test_every_command_reads_a_file_holding_all_of_them(tmp_path):
    path = tmp_path / "s.jsonl"
    bad = [b for b, _ in BAD_LINES.values()]
    path.write_text("\n".join([line(HEADER), msg(0, "system", "sys"), msg(1), *bad, msg(2, "assistant", "done"),
                                msg(3)]) + "\n", encoding="utf-8")
    for cmd in (["simulate", str(path), "--json", "--counter", "heuristic"], ["simulate", str(path)],
                ["tokens", str(path), "--json"]):
        out = run_cli(*cmd)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        warnings = [w for w in out.stderr.splitlines() if w.startswith("breakwater: warning:")]
        assert [w.split(": ")[2] for w in warnings] == [f"{path}:{n}" for n in range(4, 4 + len(bad))]
        assert len(out.stderr.strip().splitlines()) == len(bad)


def test_openai_message_arrays_survive_the_same_fields(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text('[{"role": "system", "content": "s"}, {"role": "user", "content": "a\\ud800b", "turn": NaN},'
                    ' {"role": "assistant", "content": "", "tool_calls": [{"id": 5, "function": "bash"}]},'
                    ' {"role": "user", "content": "x", "n": ' + "9" * 5000 + '}]')
    log = load_session(path)
    assert [m.role for m in log.messages][:2] == ["system", "user"] and log.messages[-1].content == "x"
    assert log.messages[1].content == "a\ufffdb"
    reasons = " | ".join(str(i) for i in log.issues)
    assert "lone surrogate" in reasons and "4300 digits" in reasons


def test_openai_array_nested_too_deeply_is_one_clear_error(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(NESTED)
    out = run_cli("simulate", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [f"breakwater: {path}: nested too deeply to read"]


def test_an_unexpected_failure_prints_one_line_and_writes_a_crash_report(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([line(HEADER)] + [msg(i, "user" if i % 2 else "assistant", "x" * 200)
                                                for i in range(400)]) + "\n")
    env = {"PATH": "/usr/bin:/bin", "BREAKWATER_CACHE_DIR": str(tmp_path / "cache"),
           "OPENAI_API_KEY": "sk-crash-report-secret-123456"}
    with open("/dev/full", "w") as full:  # the disk is full: writing the output fails
        out = subprocess.run([sys.executable, "-m", "breakwater", "simulate", str(path), "--json"], stdout=full,
                             stderr=subprocess.PIPE, text=True, timeout=120, env=env)
    assert out.returncode == 70
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr
    assert "internal error (OSError: [Errno 28] No space left on device)" in lines[0]
    report = lines[0].rsplit("report written to ", 1)[1]
    text = open(report, encoding="utf-8").read()
    assert report.startswith(str(tmp_path / "cache" / "crash"))
    assert "Traceback (most recent call last)" in text and "command: breakwater simulate" in text


def test_the_crash_report_and_its_line_hide_the_key(tmp_path, monkeypatch):
    from breakwater.cli.crash import report_crash

    secret = "sk-crash-report-secret-123456"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("BREAKWATER_CACHE_DIR", str(tmp_path))
    try:
        json.loads('{"key": "' + secret)  # a real failure whose message quotes the key
    except ValueError as exc:
        said = report_crash(exc, ["run", "--prompt", secret])
    report = said.rsplit("report written to ", 1)[1]
    assert secret not in said and secret not in open(report).read()
    assert "[redacted]" in open(report).read()


def test_a_summary_of_everything_while_a_call_awaits_its_result_replays(tmp_path):
    from breakwater.core.policy import preset
    from breakwater.core.simulate import simulate

    path = tmp_path / "s.jsonl"
    path.write_text("\n".join([
        line(HEADER), msg(0, "system", "sys"), msg(1),
        msg(2, "assistant", "", tool_calls=[{"id": "c1", "function": {"name": "bash", "arguments": "{}"}}]),
        line({"type": "compaction", "id": "e1", "summary": "done so far", "trigger": "manual"}),
        msg(3, "assistant", "done"), msg(4)]) + "\n")
    sim = simulate(load_native(path), preset("breakwater"), "heuristic")
    assert [t.turn for t in sim.turns] == [1, 2]
