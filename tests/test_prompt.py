"""Prompt layers: the static prefix is byte-identical across turns and sessions."""

from breakwater.core.log.message import Message
from breakwater.core.fold.pipeline import Pipeline
from breakwater.core.policy import preset
from breakwater.core.stages.prompt import (PROJECT_HISTORY_HEADER, RETRIEVED_HEADER, session_context, static_system,
                                    system_prompt, volatile_context, with_volatile)
from synth import session_messages

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}},
         {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def test_static_prefix_is_byte_identical_across_turns_and_sessions():
    static = static_system(TOOLS)
    assert static == static_system([dict(t) for t in TOOLS])
    s1 = system_prompt(static, session_context("a" * 32, "/w", "gpt-4o", "## Session 1234abcd\nfixed pool"))
    s2 = system_prompt(static_system(TOOLS), session_context("b" * 32, "/w", "gpt-4o"))
    assert s1.startswith(static) and s2.startswith(static)
    assert PROJECT_HISTORY_HEADER in s1 and s1.index(PROJECT_HISTORY_HEADER) > len(static)

    msgs = [Message("m00000", "system", s1)] + session_messages(400, avg_tool_chars=3000, seed=1)[1:]
    pipe = Pipeline(preset("breakwater").with_changes(window=16_000))
    firsts = []
    for i, m in enumerate(msgs):
        if m.role == "assistant":
            view = pipe.view()[0]
            volatile = volatile_context(f"2026-11-{1 + i % 28:02d}", "/w", "- [FILE] app/db/pool.py" if i % 2 else None)
            req = [sent.to_api() for sent in with_volatile(view.messages, volatile)]
            firsts.append(req[0]["content"].encode())
            assert req[0]["content"].startswith(static)
            # the volatile layer is never in the system message
            assert RETRIEVED_HEADER not in req[0]["content"] and "Date:" not in req[0]["content"]
        pipe.feed(m)
    assert len(set(firsts)) == 1 and len(firsts) > 100


def test_volatile_layer_rides_on_the_latest_user_message():
    msgs = [Message("s", "system", "s"), Message("u1", "user", "first"), Message("a", "assistant", "ok"),
            Message("u2", "user", "second")]
    api = [m.to_api() for m in msgs]
    out = [m.to_api() for m in with_volatile(msgs, volatile_context("2026-11-29", "/w", "[FILE] x.py"))]
    assert out[1] == api[1] and out[3]["content"].endswith("second")
    assert out[3]["content"].startswith("[Context for this turn]") and RETRIEVED_HEADER in out[3]["content"]
    assert api[3]["content"] == "second" and msgs[3].content == "second"  # the input is not modified


def test_tool_schemas_are_not_repeated_in_the_system_text():
    static = static_system(TOOLS)
    assert "Tools: bash, read_file." in static and "parameters" not in static and "{" not in static


def test_what_was_sent_stays_as_sent_only_the_end_changes():
    """A user message keeps the volatile layer it first went out with; the next user message gets
    the layer of its own turn. Each request then starts with the whole previous one."""
    msgs = [Message("s", "system", "You are an agent.")]
    pipe = Pipeline(preset("breakwater"))
    sent_with: dict[str, str] = {}
    previous = None
    for day in range(1, 8):
        msgs.append(Message(f"u{day}", "user", f"task of day {day}"))
        pipe.feed(msgs[-1])
        volatile = volatile_context(f"2026-11-{day:02d}", "/w", f"- [FILE] day{day}.py")
        req = [m.to_api() for m in with_volatile(pipe.view()[0].messages, volatile, sent_with)]
        sent_with.setdefault(f"u{day}", volatile)
        assert req[-1]["content"].startswith(volatile) and req[-1]["content"].endswith(f"task of day {day}")
        if previous is not None:
            assert req[: len(previous)] == previous
        previous = req
        msgs.append(Message(f"a{day}", "assistant", f"done {day}"))
        pipe.feed(msgs[-1])
