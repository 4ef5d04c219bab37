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

    items: list = []   # an array is split once, and each item decoded once as the loader reaches it
    decoded: list[bytes] = []
    split = json_lines._RAW_ITEMS
    monkeypatch.setattr(json, "loads", counted(loads, "json"))
    monkeypatch.setattr(json_lines, "_DECODE", counted(lambda doc: decoded.append(bytes(doc)) or decode(doc),
                                                       "msgspec"))
    monkeypatch.setattr(json_lines, "_RAW_ITEMS", lambda raw: items.extend(split(raw)) or list(items))
    log = load_session(path)
    assert len(log.messages) >= 59
    if name in ("openai", "openhands"):   # one JSON array
        assert whole == [] and len(items) > 59
        assert sorted(decoded) == sorted(bytes(item) for item in items)
    else:
        assert whole == ["msgspec"]


@pytest.mark.parametrize("name", ["openai", "openhands"])
def test_an_array_is_read_item_by_item_and_never_whole(name, tmp_path, monkeypatch):
    """The items of a JSON array are decoded as the loader reaches them, each item's bytes let go:
    neither the decoded document nor the file's bytes sit whole beside the session being built (a
    64,000-message OpenAI array: simulate's peak 195 -> 179 MB). At most a few items are held decoded
    at once."""
    import weakref

    ext, write = WRITERS[name]
    path = write(session_messages(300, avg_tool_chars=400, seed=4), tmp_path / f"session{ext}")
    alive: list[weakref.ref] = []
    held: list[int] = []
    plain = json_lines._plain

    class Item(dict):   # a dict that a weak reference can follow
        pass

    def watched(item):
        value = Item(plain(item))
        alive.append(weakref.ref(value))
        held.append(sum(r() is not None for r in alive))
        return value

    monkeypatch.setattr(json_lines, "_plain", watched)
    log = load_session(path)
    assert len(log.messages) >= 299 and len(held) >= 299
    assert max(held) <= 3, max(held)


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
