"""The bundled sample sessions: they load cleanly, their ids/turns/tool pairs are consistent,
they are exactly what scripts/make_samples.py writes, and each shows the mechanism it is for."""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from breakwater.core.log.message import Message
from breakwater.core.log.session_log import SessionLog, load_native

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_sessions"
GENERATOR = ROOT / "scripts" / "make_samples.py"

NAMES = (
    "npm-install-flood.jsonl",
    "nginx-error-log.jsonl",
    "long-refactor.jsonl",
    "sanitizer-mess.jsonl",
    "mixed-zh-en.jsonl",
)
SANITIZER = "sanitizer-mess.jsonl"
FRIENDLY_ERRORS = ("The request was cancelled by the user.", "I'm sorry, something went wrong. Please try again.")


@lru_cache(maxsize=None)
def load(name: str) -> SessionLog:
    return load_native(SAMPLES / name)


def estimate(text: str) -> int:
    """SPEC §2 heuristic for one text."""
    ascii_chars = len(text.encode("ascii", "ignore"))
    return ascii_chars // 4 + (len(text) - ascii_chars) // 2 + 1


def message_tokens(m: Message) -> int:
    return estimate(m.content) + 4 + sum(estimate(tc.name + tc.arguments) + 10 for tc in m.tool_calls)


def limits(window: int) -> tuple[int, int]:
    soft = int(0.70 * window)
    buffer = 13_000 if soft < window - 13_000 else int(0.15 * window)
    return soft, window - buffer


def tool_blocks(log: SessionLog) -> list[tuple[Message, list[Message]]]:
    """Each assistant message with tool calls and the tool messages right after it."""
    msgs = log.messages
    out = []
    for i, m in enumerate(msgs):
        if m.role == "assistant" and m.tool_calls:
            j = i + 1
            while j < len(msgs) and msgs[j].role == "tool":
                j += 1
            out.append((m, msgs[i + 1:j]))
    return out


# -- every sample ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_loads_without_issues(name):
    log = load(name)
    assert log.issues == []
    assert len(log.messages) > 10


@pytest.mark.parametrize("name", NAMES)
def test_header(name):
    h = load(name).header
    assert h["type"] == "session" and h["version"] == 1
    assert isinstance(h["window"], int) and h["window"] > 0
    assert re.fullmatch(r"[0-9a-f]{32}", h["id"])
    assert h["model"] and h["title"] and h["workspace"].startswith("/home/dev/")
    assert (SAMPLES / name).stat().st_size < 4_000_000


@pytest.mark.parametrize("name", NAMES)
def test_ids_and_turns(name):
    log = load(name)
    msgs = log.messages
    assert [m.id for m in msgs] == [f"m{i:05d}" for i in range(len(msgs))]
    assert [e.id for e in log.events] == [f"e{i:05d}" for i in range(len(log.events))]
    assistants = 0
    for m in msgs:
        if m.role == "assistant":
            assistants += 1
            assert m.turn == assistants, m.id
        elif m.role == "system" and m.id == "m00000":
            assert m.turn == 0
        else:
            assert m.turn == assistants + 1, m.id
        assert m.meta and "ts" in m.meta
    # usage events follow their assistant message and carry its turn
    last_turn = 0
    for e in log.entries:
        if isinstance(e, Message):
            if e.role == "assistant":
                last_turn = e.turn
        elif e.type == "usage":
            assert e.get("turn") == last_turn
            assert 0 < e.get("prompt_tokens") <= log.header["window"]


@pytest.mark.parametrize("name", NAMES)
def test_timestamps_never_go_back(name):
    stamps = [m.meta["ts"] for m in load(name).messages]
    assert stamps == sorted(stamps)


@pytest.mark.parametrize("name", [n for n in NAMES if n != SANITIZER])
def test_every_tool_call_has_exactly_one_result(name):
    log = load(name)
    ids = [tc.id for m in log.messages for tc in m.tool_calls]
    assert len(ids) == len(set(ids)), "tool_call ids must be unique per session"
    answered = 0
    for call, results in tool_blocks(log):
        assert sorted(r.tool_call_id for r in results) == sorted(tc.id for tc in call.tool_calls), call.id
        answered += len(results)
    assert answered == sum(1 for m in log.messages if m.role == "tool"), "a tool message outside its call block"


def test_reproducible(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("make_samples", GENERATOR)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "make_samples", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    written = module.generate(tmp_path)
    assert sorted(p.name for p in written) == sorted(NAMES)
    for name in NAMES:
        assert (tmp_path / name).read_bytes() == (SAMPLES / name).read_bytes(), f"{name} differs from the generator"


# -- what each sample is for ---------------------------------------------------------------------
def test_npm_flood_is_cut_at_the_source():
    log = load("npm-install-flood.jsonl")
    assert log.header["window"] == 32000
    msgs = log.messages
    cut = [m for m in msgs if m.role == "tool" and m.meta and "source" in m.meta]
    assert len(cut) == 1
    m = cut[0]
    src = m.meta["source"]
    assert src["total_lines"] >= 7_500 and src["dropped_lines"] == src["total_lines"] - 400
    assert src["total_bytes"] > 500_000 and src["exit_code"] == 1
    assert src["spill"] == f".agent/spill/{log.header['id']}/{m.tool_call_id}.log"
    head, marker, tail = m.content.partition(f"\n... [{src['dropped_lines']} lines truncated for context efficiency] ...\n")
    assert marker and len(head.splitlines()) == 80 and len(tail.splitlines()) >= 320
    assert src["spill"] in tail and "read_file" in tail and "start_line" in tail
    assert "npm ERR! code ERESOLVE" in tail and "npm http fetch GET 200" in head
    # a big uncut tool result earlier, for snip
    before = msgs[:msgs.index(m)]
    assert any(b.role == "tool" and len(b.content) > 5_000 and not (b.meta or {}).get("source") for b in before)
    # the agent reads a range of the spill file afterwards
    later = [tc for x in msgs[msgs.index(m):] for tc in x.tool_calls if tc.name == "read_file"]
    assert any(src["spill"] in tc.arguments and "start_line" in tc.arguments for tc in later)
    assert 25 <= len(msgs) <= 60
    # with everything in it, the history passes the soft limit of its window
    assert sum(message_tokens(x) for x in msgs) > limits(32000)[0]


def test_nginx_log_read_in_one_call():
    log = load("nginx-error-log.jsonl")
    assert log.header["window"] == 128000
    big = [m for m in log.messages if m.role == "tool" and len(m.content.splitlines()) >= 20_000]
    assert len(big) == 1
    text = big[0].content
    for needle in ("upstream timed out (110: Connection timed out) while reading response header from upstream",
                   'server: api.example.com, request: "GET /v1/orders HTTP/1.1", upstream: "http://10.0.3.17:8080/v1/orders"',
                   "connect() failed (111: Connection refused)", "no live upstreams", "SSL_do_handshake() failed"):
        assert needle in text
    assert not (big[0].meta or {}).get("source"), "recorded without tier 1"
    assert 12 <= len(log.messages) <= 30


def test_long_refactor_passes_the_hard_limit_many_times_over():
    log = load("long-refactor.jsonl")
    window = log.header["window"]
    assert window == 32000
    soft, hard = limits(window)
    assert (soft, hard) == (22_400, 27_200)
    msgs = log.messages
    assert 400 <= len(msgs) <= 600
    assert 120 <= log.turn_count() <= 200
    total = sum(message_tokens(m) for m in msgs)
    assert total > 3 * hard
    assert sum(1 for m in msgs if m.role == "user") >= 5
    assert sum(1 for m in msgs if len(m.tool_calls) >= 2) >= 10, "parallel tool calls"
    assert {tc.name for m in msgs for tc in m.tool_calls} == {"bash", "read_file", "write_file"}
    assert sum(1 for e in log.events if e.type == "usage") == log.turn_count()


def test_sanitizer_mess_has_every_defect():
    log = load(SANITIZER)
    msgs = log.messages
    assert any(m.role == "assistant" and re.fullmatch(r"\[tool_call: \w+\]", m.content) for m in msgs)
    assert any(m.role == "tool" and m.tool_call_id is None and m.content == "legacy tool message" for m in msgs)
    calls = {tc.id for m in msgs for tc in m.tool_calls}
    results = [m.tool_call_id for m in msgs if m.role == "tool" and m.tool_call_id is not None]
    assert calls - set(results), "an orphan call"
    assert set(results) - calls, "an orphan result"
    assert any(len(m.tool_calls) == 2 and len(set(results) & {tc.id for tc in m.tool_calls}) == 1 for m in msgs)
    roles = [m.role for m in msgs]
    assert any(a == b == "user" for a, b in zip(roles, roles[1:]))
    assert any(a == b == "assistant" for a, b in zip(roles, roles[1:]))
    replies = {m.content for m in msgs if m.role == "assistant"}
    assert all(e in replies for e in FRIENDLY_ERRORS)
    assert any(m.role == "user" and m.content == "写个排序函数" for m in msgs)
    assert 20 <= len(msgs) <= 35


def test_mixed_zh_en_is_mostly_chinese_from_the_user():
    log = load("mixed-zh-en.jsonl")
    assert log.header["window"] == 16000
    assert log.header["model"] == "qwen2.5-coder-32b-instruct"
    user_text = "".join(m.content for m in log.messages if m.role == "user")
    non_ascii = len(user_text) - len(user_text.encode("ascii", "ignore"))
    assert non_ascii / len(user_text) > 0.30
    assert any(m.role == "tool" and sum(ord(c) > 0x2E80 for c in m.content) > 1_000 for m in log.messages), \
        "a CJK-heavy tool output"
    assert 60 <= len(log.messages) <= 100
    assert sum(message_tokens(m) for m in log.messages) > limits(16000)[0]
