"""Offline extraction of [FILE] / [DECISION] / [ERROR] / [PROGRESS] bullets."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from breakwater.core.log.message import Message, ToolCall
from breakwater.memory.extract import MAX_DECISIONS, MAX_ERRORS, MAX_FILES, extract, extract_bullets, paths_in


def msg(role: str, content: str = "", calls: tuple[ToolCall, ...] = (), n: int = 0) -> Message:
    return Message(id=f"{role}-{n}-{len(content)}", role=role, content=content, tool_calls=calls, turn=n)


def call(name: str, **args) -> ToolCall:
    return ToolCall(id=f"c-{name}", name=name, arguments=json.dumps(args))


SESSION = [
    msg("system", "You are a coding agent. Never touch secret/config.yaml. We decided nothing here."),
    msg("user", "The service times out on startup; look at src/db/pool.go please."),
    msg("assistant", "Reading the pool code first.", (call("read_file", path="src/db/pool.go"),), 1),
    msg("tool", "package db\n// pool of 10 connections\nfunc Open() error {", n=1),
    msg("assistant", "", (call("bash", command="go test ./... && cat internal/cfg/settings.toml"),), 2),
    msg("tool", "--- FAIL: TestOpen\nError: dial tcp 127.0.0.1:5432: connection refused\n"
                "Error: dial tcp 127.0.0.1:5432: connection refused\nFAIL\tgithub.com/x/db\t0.2s", n=2),
    msg("assistant", "I decided to raise the pool size to 50 because the load test saturates it. "
                     "The timeout is fine as it is. 我们改用连接池预热，因为冷启动太慢。", n=3),
    msg("assistant", "Pool size raised in src/db/pool.go; tests pass now.", n=4),
]


def test_bullets_of_a_session():
    bullets = extract_bullets(SESSION)
    assert "- [FILE] src/db/pool.go: read_file" in bullets
    assert "- [FILE] internal/cfg/settings.toml: bash" in bullets
    assert not any("secret/config.yaml" in b for b in bullets), "system messages are excluded"
    decisions = [b for b in bullets if b.startswith("- [DECISION]")]
    assert "- [DECISION] I decided to raise the pool size to 50 because the load test saturates it." in decisions
    assert any("改用连接池预热" in d for d in decisions)
    assert not any("The timeout is fine" in d for d in decisions)
    errors = [b for b in bullets if b.startswith("- [ERROR]")]
    assert errors.count("- [ERROR] Error: dial tcp 127.0.0.1:5432: connection refused") == 1, "deduplicated"
    assert any("FAIL: TestOpen" in e for e in errors)
    assert bullets[-1] == "- [PROGRESS] Pool size raised in src/db/pool.go; tests pass now."


def test_deterministic():
    assert extract(SESSION) == extract(list(SESSION)) == "\n".join(extract_bullets(SESSION))


def test_each_message_is_cut_to_500_chars():
    late = "x" * 520 + " see late/hidden.py, Error: late failure"
    bullets = extract_bullets([msg("user", late), msg("assistant", "ok")])
    assert not any("hidden.py" in b or "late failure" in b for b in bullets)


def test_paths_in_text():
    text = ("Edit ./app/main.py and utils.go, then /etc/hosts, ~/.bashrc and docs/guide/intro. "
            "Not e.g. version 3.11.7, https://example.com/a/b.html or and/or.")
    assert paths_in(text) == ["./app/main.py", "utils.go", "/etc/hosts", "~/.bashrc", "docs/guide/intro"]


def test_nothing_to_extract():
    assert extract([]) == ""
    assert extract([msg("system", "decided to fail with error in a.py")]) == ""


messages = st.lists(
    st.builds(
        msg,
        st.sampled_from(["system", "user", "assistant", "tool"]),
        st.text(max_size=800),
        st.lists(st.builds(ToolCall, st.just("c"), st.sampled_from(["bash", "read_file", ""]),
                           st.text(max_size=300)), max_size=2).map(tuple),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(messages)
def test_bullets_are_tagged_single_lines_and_bounded(ms):
    bullets = extract_bullets(ms)
    tags = [b.split("]", 1)[0] + "]" for b in bullets]
    assert all(t in ("- [FILE]", "- [DECISION]", "- [ERROR]", "- [PROGRESS]") for t in tags)
    assert all("\n" not in b and "\r" not in b for b in bullets)
    assert tags.count("- [FILE]") <= MAX_FILES and tags.count("- [DECISION]") <= MAX_DECISIONS
    assert tags.count("- [ERROR]") <= MAX_ERRORS and tags.count("- [PROGRESS]") <= 1
    assert extract_bullets(ms) == bullets
