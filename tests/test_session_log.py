"""Bad input is reported with its line number and the rest loads."""

import json
import subprocess
import sys

import pytest

from breakwater.core.log.message import Message
from breakwater.core.log.session_log import SessionLog, SessionLogError, load_native

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


def test_each_line_reads_as_the_json_module_reads_it(tmp_path):
    """Well-formed lines go to msgspec (issue 8 item 9: twice as fast); what it reads must be what the
    json module reads, byte for byte once dumped, and whatever it refuses must still be read by json."""
    import random

    from breakwater.core.log.json_lines import iter_json_lines

    rnd = random.Random(3)
    numbers = ["0", "-0", "-0.0", "1e308", "1e309", "-1e400", "1E+2", "2.2250738585072011e-308", "NaN", "-Infinity",
               "18446744073709551616", "-9223372036854775809", "1" + "0" * 4000, "1" + "0" * 4400]
    numbers += [f"{rnd.randint(0, 10 ** rnd.randint(1, 25))}.{rnd.randint(0, 10 ** rnd.randint(1, 20))}"
                f"e{rnd.randint(-330, 310)}" for _ in range(300)]
    texts = ['"\\ud83d\\ude00"', '"\\ud800"', '"a\\udc00b"', '"\\u00e9\\n\\t\\"\\\\"', '"连接 ✓"', '""']
    lines = [f'{{"type": "note", "id": "n{i}", "value": {v}, "a": 1, "a": [2]}}' for i, v in enumerate(numbers + texts)]
    lines += ['{"x": ' + "[" * d + "1" + "]" * d + "}" for d in (255, 256, 900, 990, 1000, 5000)]
    lines += ['{"x": ' + '[{"a": ' * d + "1" + "}]" * d + "}" for d in (127, 128, 300, 495, 500)]   # mixed
    lines += ['{"x": [' + ", ".join(["[[1]]"] * 400) + "]}"]   # many brackets, shallow
    path = tmp_path / "lines.jsonl"
    path.write_text("\n".join(lines) + "\n")
    got = list(iter_json_lines(path))
    assert [n for n, _, _ in got] == list(range(1, len(lines) + 1))
    for line, (_, obj, problem) in zip(lines, got):
        try:
            want = json.loads(line)
        except RecursionError:
            assert obj is None and problem == "nested too deeply to read, skipped"
            continue
        except ValueError:   # a number of more than 4,300 digits: read as null
            assert problem.startswith("a number of more than") and obj["value"] is None
            continue
        if "\\ud800" in line or "\\udc00" in line:
            assert problem.startswith("a lone surrogate escape")
            continue
        assert problem is None and json.dumps(obj) == json.dumps(want), line[:80]


def test_msgspec_refuses_every_lone_surrogate_escape_the_json_module_reads():
    """Lines go to msgspec without a look for surrogate escapes first (a scan of every byte): that is
    only right while msgspec refuses each lone one (the json module reads it, then it is repaired)
    and reads a pair as the json module does."""
    import random

    import msgspec

    rnd = random.Random(5)
    pieces = ["\\ud800", "\\udbff", "\\udc00", "\\udfff", "\\uD83D", "\\uDE00", "\\ud83d\\ude00", "a", "\\n",
              "\\u0041", "\\\\", '\\"', "é", "中", " ", "\\ud83d\\u0041", "\\ud83d\\\\ude00"]
    for _ in range(20_000):
        text = '"' + "".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 6))) + '"'
        raw = f'{{"role": "user", "content": {text}, "meta": {{{text}: [{text}]}}}}'.encode()
        want = json.loads(raw)
        lone = any("\ud800" <= ch <= "\udfff" for ch in want["content"])
        try:
            got = msgspec.json.decode(raw)
        except msgspec.DecodeError:
            assert lone, raw
        else:
            assert not lone and got == want, raw


def _loaded(path):
    log = load_native(path)
    return ([(type(e).__name__, e.to_record()) for e in log.entries], [str(i) for i in log.issues], log.header)


def test_message_lines_read_by_msgspec_load_as_the_general_way_reads_them(tmp_path, monkeypatch):
    """A message line in the usual shape is decoded straight into typed fields (issue 8 item 9); any
    line, every field of every type, must load (entries, ids, turns, warnings) as the general reader
    loads it, field by field from what the json module reads."""
    from breakwater.core.log import session_log

    m = '{"type": "message", "id": "x", "turn": 2, "role": "assistant", "content": "c"'
    call = '{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}'
    variants = [m + "}", m + ', "tool_calls": [' + call + ", " + call + "]}", m + ', "tool_calls": []}',
                m + ', "tool_calls": null}', m + ', "tool_calls": "bash"}', m + ', "tool_calls": {}}',
                m + ', "tool_calls": [{"id": "c", "name": "flat", "arguments": "{}"}]}',
                m + ', "tool_calls": [{"function": null}]}', m + ', "tool_calls": [{"function": {}}]}',
                m + ', "tool_calls": [{"id": 7, "function": {"name": "x", "arguments": {"a": 1}}}]}',
                m + ', "tool_calls": [{"function": {"name": "x", "arguments": null}}]}', m + ', "tool_calls": [5]}',
                '{"type": "message", "role": "user", "content": "no id, no turn"}',
                '{"type": "message", "id": "", "turn": null, "role": "user"}',
                '{"type": "message", "id": null, "role": "user", "content": null}',
                '{"type": "message", "id": 12, "role": "user", "content": ["a", {"text": "b"}]}',
                '{"role": "user", "content": "no type"}', '{"type": null, "role": "user"}',
                '{"type": "note", "id": "n", "role": "user"}', '{"type": 5, "role": "user"}',
                '{"type": "message", "role": "user", "type": "note", "id": "n2"}',
                '{"type": "message", "role": "user", "\\u0074ype": "note"}',
                '{"type": "message", "role": "user", "content": "a", "content": "b", "turn": 1, "turn": 3}',
                '{"type": "message", "content": "no role"}', '{"type": "message", "role": ""}',
                '{"type": "message", "role": null}', '{"type": "message", "role": "robot"}',
                '{"type": "message", "role": "tool", "tool_call_id": "c1", "name": "bash", "content": "out"}',
                '{"type": "message", "role": "tool", "tool_call_id": 5, "name": 6, "content": 7}',
                '{"type": "message", "role": "tool", "tool_call_id": null, "name": null}']
    variants += [f'{{"type": "message", "role": "user", "turn": {t}}}'
                 for t in ("0", "1.0", "1.5", "-1", "1000000000", "1000000001", "true", '"3"', "18446744073709551616")]
    variants += [f'{{"type": "message", "role": "tool", "tool_call_id": "c", "meta": {meta}}}'
                 for meta in ("{}", "null", "[]", '{"at": "t"}', '{"source": {"total_lines": 3, "exit_code": 1}}',
                              '{"source": {"total_lines": "many", "max_lines": 1e999}}', '{"source": 5}',
                              '{"x": NaN}', '{"x": 1e999999}')]
    variants += [m + f', "extra": {v}}}' for v in ("NaN", "Infinity", "1e999999", "1" + "0" * 4301, "1" + "0" * 4200,
                                                   "[" * 300 + "]" * 300, "[" * 200 + "]" * 200, "1.", "-", "01", "tru",
                                                   "[1,]", '{"a": 1,}', '"\\ud800"', '"\\ud83d\\ude00"', '"\\u00e9"',
                                                   '"\\u00zz"', '"\\q"', '"a\x7fb"', '"a\x1fb"')]
    variants += [m + "} {}", m + "}{" + m[1:] + "}", m + "} x", "null", "[1]", "5", '"text"', "  " + m + "}  ",
                 m + ', "extra": 1']
    # what the json module warns about or refuses, in the fields read: numbers, nesting, text
    variants += [m + f', "meta": {{"x": {v}}}}}' for v in ("1" + "0" * 4301, "1" + "0" * 4200, "1e999999", "NaN",
                                                         "[" * 300 + "]" * 300, "[" * 200 + "]" * 200,
                                                         '[{"a": ' * 300 + "1" + "}]" * 300, '"\\udc00"')]
    # the json module's nesting limit and msgspec's, a few levels deeper, both depend on the stack
    variants += [m + ', "meta": {"x": ' + "[" * d + "]" * d + "}}" for d in range(600, 1000)]
    variants += [m + ', "tool_calls": [{"id": "c", "type": 5, "function": {"name": "x", "arguments": "{}"}}]}',
                 m + ', "tool_calls": [{"id": "c", "function": {"name": "x", "arguments": "{}", "more": 1}}]}',
                 m + ', "tool_calls": [{"id": "c", "extra": 1, "function": {"name": "x"}}]}',
                 m[:-1] + 'x' * 5000 + '", "meta": {"source": {"total_lines": 1' + "0" * 4400 + '}}}']
    path = tmp_path / "s.jsonl"
    body = b"".join([line(HEADER), *(v.encode() + b"\n" for v in variants),
                     m.encode() + b', "extra": "\xff"}\n', m.encode() + b'}\r\n', m.encode() + b', "content": "\xc3\xa9"}\n',
                     m.encode() + b', "content": "a\xffb"}\n', m.encode() + b', "name": "\xe9"}\n',
                     m.encode() + b', "meta": {"\xc3": 1}}\n', m.encode() + b', "content": "' + "连接".encode() * 3000 + b'"}\n',
                     m.encode() + b"}"])   # a last line without its newline
    path.write_bytes(body)
    fast = _loaded(path)
    monkeypatch.setattr(session_log, "_DECODE_MESSAGE", lambda raw: json.loads("[1, }"))   # refuse every line
    general = _loaded(path)
    assert fast == general
    assert len(fast[1]) > 30 and len(fast[0]) > 40   # the variants do reach both readers' warnings
