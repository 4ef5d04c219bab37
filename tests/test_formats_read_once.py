"""Telling a file's format reads no more of it than the loader would, and a JSON document is parsed
once: the whole file read to tell it apart is what its loader is handed."""

import json
import sys

import pytest

from breakwater.core.log import json_lines
from breakwater.formats import detect_format, load_session

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "bench"))
from format_sessions import WRITERS  # noqa: E402
from synth import session_messages  # noqa: E402

DOCUMENTS = ("openai", "litellm", "swe-agent", "mini-swe-agent", "openhands")


@pytest.mark.parametrize("name", DOCUMENTS)
def test_a_json_document_is_parsed_once(name, tmp_path, monkeypatch):
    ext, write = WRITERS[name]
    path = write(session_messages(60, avg_tool_chars=400, seed=3), tmp_path / f"session{ext}")
    size = path.stat().st_size
    whole: list[str] = []
    loads, decode = json.loads, json_lines._DECODE

    def counted(fn, who):
        def parse(doc, *args, **kwargs):
            if len(doc) >= size - 1:   # the whole file (its text or its bytes)
                whole.append(who)
            return fn(doc, *args, **kwargs)
        return parse

    monkeypatch.setattr(json, "loads", counted(loads, "json"))
    monkeypatch.setattr(json_lines, "_DECODE", counted(decode, "msgspec"))
    log = load_session(path)
    assert len(log.messages) >= 59
    assert whole == ["msgspec"]


def test_a_first_line_longer_than_the_head_still_tells_the_format(tmp_path):
    """A Claude Code file opening with a 70 KB prompt was taken for a native log (its first line,
    cut at 64 KB, did not parse) and imported as one."""
    path = tmp_path / "long-first.jsonl"
    lines = [{"parentUuid": None, "uuid": "u1", "sessionId": "s1", "type": "user",
              "message": {"role": "user", "content": "x" * 70_000}},
             {"parentUuid": "u1", "uuid": "u2", "sessionId": "s1", "type": "assistant",
              "message": {"id": "a1", "role": "assistant", "content": [{"type": "text", "text": "done"}]}}]
    path.write_text("".join(json.dumps(rec) + "\n" for rec in lines))
    assert detect_format(path) == "claude-code"
    log = load_session(path)
    assert [m.role for m in log.messages] == ["user", "assistant"]
    assert log.messages[0].content == "x" * 70_000


def test_a_one_line_document_with_an_integer_too_long_is_still_told_apart(tmp_path):
    """A one-line mini-swe-agent trajectory holding a 5,000-digit number was taken for a native log."""
    path = tmp_path / "run.traj.json"
    path.write_text('{"info": {"mini_version": "1.9"}, "messages": [{"role": "user", "content": "fix it"}], '
                    '"n": ' + "9" * 5000 + "}")
    assert detect_format(path) == "mini-swe-agent"
    assert [m.content for m in load_session(path).messages] == ["fix it"]
