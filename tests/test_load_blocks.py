"""Loading a native log a block of message lines at a time gives what reading it line by line gives:
the same entries, the same warnings, the same line numbers, whatever the lines are and wherever the
blocks happen to end."""

import io
import json
import random

import pytest

from breakwater.core.log import session_log
from breakwater.core.log.session_log import _Loader, load_native

from test_load_bad_fields import BAD_LINES, HEADER, line, msg

# lines that look like message lines to a quick glance but are not one message object each
ODD_LINES = [
    '{"role": "user", "content": "glued"} {"role": "user", "content": "on one line"}',
    '{"role": "user", "content": "glued"}{"role": "assistant", "content": "tight"}',
    '{"role": "user", "meta": {"a": 1}',   # an object broken over two lines, each ending in }
    '}',
    '{"role": "user",',
    '"content": "split"}',
    '',
    '   ',
    '{"role": "user", "content": "crlf"}\r',
    '\t{"role": "user", "content": "indented"}',
    '{"type": "usage", "id": "u1", "prompt_tokens": 120, "estimate": 100}',
    '{"type": "pin", "message_id": "m00001"}',
    '{"role": "developer", "content": "not a chat role"}',
    '{"role": "user", "turn": -1, "content": "turn out of range"}',
    '{"role": "user", "content": "deep", "meta": {"x": ' + "[" * 300 + "]" * 300 + '}}',
    '{"role": "tool", "tool_call_id": "c1", "content": "r", "meta": {"source": {"total_lines": "many"}}}',
    '{"role": "user", "content": "bad bytes \udcff\udcfe"}',   # written as the bytes ff fe
    '{"role": "user", "content": "a}\\n{b"}',
]


def by_lines(path):
    """The reference: every line read on its own, as `for raw in file` splits them."""
    loader = _Loader(str(path))
    for lineno, raw in enumerate(io.BytesIO(path.read_bytes()), 1):
        loader.line(lineno, raw)
    return loader


def loaded(path, block, short_lines=10**9):
    """Loaded a `block` of bytes at a time, taken line by line once a block's first bytes hold more
    than `short_lines` lines (by default never: every block of message lines decoded in one call)."""
    loader = _Loader(str(path))
    saved = session_log.BLOCK, session_log._SHORT_LINES
    session_log.BLOCK, session_log._SHORT_LINES = block, short_lines
    try:
        with open(path, "rb") as fh:
            loader.read(fh)
    finally:
        session_log.BLOCK, session_log._SHORT_LINES = saved
    return loader


def same(a, b):
    assert a.header == b.header
    assert [(type(e), repr(e)) for e in a.entries] == [(type(e), repr(e)) for e in b.entries]
    assert a.issues == b.issues
    assert (a.n_msgs, a.n_events, a.assistants) == (b.n_msgs, b.n_events, b.assistants)


def message_line(rng, i):
    role = rng.choice(["user", "assistant", "tool", "system"])
    extra = {}
    if role == "assistant" and rng.random() < 0.5:
        extra["tool_calls"] = [{"id": f"c{i}", "type": "function",
                                "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]
    if role == "tool":
        extra["tool_call_id"] = f"c{i - 1}"
        if rng.random() < 0.3:
            extra["meta"] = {"source": {"total_lines": rng.choice([3, "3", None, 10**16]), "exit_code": 1}}
    content = rng.choice(["ok", "", "多字节 text ✓", "line\nbreaks\tand \"quotes\" \\ }\n{", "x" * rng.randint(0, 900)])
    fields = {"type": "message", "id": f"m{i:05d}", "turn": rng.choice([1, 2, None]), "role": role,
              "content": content, **extra}
    if fields["turn"] is None:
        del fields["turn"]
    if rng.random() < 0.1:
        del fields["type"]
    if rng.random() < 0.1:
        del fields["id"]
    return line(fields)


def session_text(rng, n, odd):
    rows = [line(HEADER)] + [message_line(rng, i) for i in range(n)]
    for _ in range(odd):
        rows.insert(rng.randint(1, len(rows)), rng.choice(ODD_LINES + [bad for bad, _ in BAD_LINES.values()]))
    text = "\n".join(rows)
    return text + rng.choice(["\n", "", "\n\n"])


@pytest.mark.parametrize("seed", range(40))
def test_blocks_give_what_lines_give(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "s.jsonl"
    path.write_bytes(session_text(rng, rng.randint(1, 60), odd=seed % 4).encode("utf-8", "surrogateescape"))
    reference = by_lines(path)
    for block in (1, 7, 64, 333, 4096, 1 << 20):
        same(loaded(path, block), reference)
    same(loaded(path, 4096, short_lines=session_log._SHORT_LINES), reference)
    same(loaded(path, 4096, short_lines=-1), reference)


def test_a_clean_log_is_read_in_blocks_and_a_last_line_cut_short_is_reported(tmp_path):
    rng = random.Random(1)
    path = tmp_path / "s.jsonl"
    text = session_text(rng, 300, odd=0).rstrip("\n") + "\n" + msg(300)[:-7]
    path.write_text(text, encoding="utf-8")
    reference = by_lines(path)
    taken = []
    original = _Loader.messages

    def counted(self, *args):
        taken.append(original(self, *args))
        return taken[-1]

    _Loader.messages = counted
    try:
        same(loaded(path, 4096), reference)
    finally:
        _Loader.messages = original
    assert sum(taken) == 300 and len(taken) > 3
    taken.clear()
    _Loader.messages = counted
    try:
        same(loaded(path, 4096, short_lines=-1), reference)   # short lines: one by one
    finally:
        _Loader.messages = original
    assert taken == []
    assert reference.issues[-1].line == 302 and "truncated last line" in reference.issues[-1].reason


@pytest.mark.parametrize("odd", ODD_LINES)
def test_each_odd_line_between_message_lines(tmp_path, odd):
    path = tmp_path / "s.jsonl"
    rows = [line(HEADER)] + [msg(i) for i in range(5)] + [odd] + [msg(i) for i in range(5, 9)]
    path.write_bytes(("\n".join(rows) + "\n").encode("utf-8", "surrogateescape"))
    reference = by_lines(path)
    for block in (16, 200, 1 << 20):
        same(loaded(path, block), reference)
    log = load_native(path)
    assert [str(i) for i in log.issues] == [str(i) for i in reference.issues]


def test_a_line_far_longer_than_a_block(tmp_path):
    path = tmp_path / "s.jsonl"
    rows = [line(HEADER), msg(0), msg(1, "tool", "y" * 50_000, tool_call_id="c"), msg(2)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    same(loaded(path, 100), by_lines(path))
    assert json.loads(rows[2])["content"] == load_native(path).messages[1].content


def test_two_objects_on_a_line_and_one_object_over_two_lines_are_not_taken_for_two_lines(tmp_path):
    """As many objects as lines in a block, yet not one each: read line by line, each is a warning."""
    path = tmp_path / "s.jsonl"
    rows = [line(HEADER), msg(0), '{"role": "user", "content": "a"} {"role": "user", "content": "b"}', msg(1),
            '{"role": "user", "content": "c", "meta": {"a": 1}', "}", msg(2)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    reference = by_lines(path)
    assert [i.line for i in reference.issues] == [3, 5, 6]
    for block in (64, 1 << 20):
        same(loaded(path, block), reference)


def test_thousands_of_short_lines_taken_a_batch_at_a_time(tmp_path):
    rng = random.Random(7)
    path = tmp_path / "s.jsonl"
    rows = [line(HEADER)] + [msg(i, rng.choice(["user", "assistant"]), "x" * rng.randint(0, 20)) for i in range(3000)]
    for at, odd in zip((1025, 1026, 2049, 2500, 2999), (0, 12, 13, 15, 16)):   # each one warning
        rows.insert(at, ODD_LINES[odd])
    path.write_bytes(("\n".join(rows) + "\n").encode("utf-8", "surrogateescape"))
    reference = by_lines(path)
    assert len(reference.issues) == 5
    same(loaded(path, 1 << 20, short_lines=session_log._SHORT_LINES), reference)
    same(loaded(path, 1 << 16, short_lines=-1), reference)


@pytest.mark.parametrize("padding", [0, 200])
def test_a_line_nested_near_the_json_limit_reads_the_same_whoever_reads_it_and_wherever(tmp_path, monkeypatch, padding):
    """The json module's nesting limit depends on how deep the stack is: every line not taken as a
    message meets it at the same depth, in the first block or after it, whether msgspec decoded it
    (and it was not a message the fast way takes) or refused it."""
    m = '{"type": "message", "id": "x", "turn": 2, "role": "assistant", "content": "c"'
    deep = [m + ', "meta": {"x": ' + "[" * d + "]" * d + "}}" for d in range(600, 1000)]
    plain = [msg(k, content=f"padding {k}") for k in range(padding)]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(text + "\n" for text in [line(HEADER), *plain, *deep]), encoding="utf-8")

    def read(block):
        got = loaded(path, block, short_lines=8)
        return [e.to_record() for e in got.entries], [(i.line, i.reason) for i in got.issues]

    fast = read(4096)
    assert any("nested too deeply" in reason for _, reason in fast[1])   # the limit is within the range
    monkeypatch.setattr(session_log, "_DECODE_MESSAGE", lambda raw: json.loads("[1, }"))   # refuse every line
    assert read(4096) == fast
    assert read(1 << 20) == fast
