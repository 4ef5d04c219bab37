"""The agent loop against the fake OpenAI server: streaming, tools, retries, compaction, approvals.

Real parts only (STYLE rule 15): the real `openai` client over HTTP on 127.0.0.1, real bash
subprocesses, real files. The server runs in strict mode, so a request a provider would
reject (orphaned tool results, over the window, layers out of order) fails the test loudly.
"""

from __future__ import annotations

import time

import pytest
from agent_support import (
    KEY,
    STATIC,
    Script,
    agent_config,
    agent_requests,
    answered,
    assert_log_valid,
    events,
    load,
    replayed_requests,
    serve,
    strip_volatile,
)
from support.fake_openai import Reply, ScriptedToolCall
from support.request_checks import heuristic_tokens

from breakwater.agent import AgentError, AgentSession, run_agent
from breakwater.agent.session import resolve_policy
from breakwater.core.stages.summarize import SUMMARY_HEADER


def bash(command: str, id: str | None = None) -> ScriptedToolCall:
    return ScriptedToolCall("bash", {"command": command}, id=id)


async def run(server, tmp_path, prompt="Do the task.", **kw):
    seen = []
    approve = kw.pop("approve", None)
    max_steps = kw.pop("max_steps", None)
    result = await run_agent(agent_config(server, tmp_path, **kw), prompt, approve=approve, on_event=seen.append,
                             max_steps=max_steps)
    return result, load(result.session_path), seen


# streaming and the shape of every request


async def test_a_streamed_answer_is_returned_logged_and_usage_recorded(tmp_path):
    text = "The answer, streamed in small pieces so that several chunks arrive."
    script = Script([Reply(text=text, chunk_size=4, prompt_tokens=321)])
    with serve(script, window=8000) as server:
        result, log, seen = await run(server, tmp_path)
    assert result.answer == text
    assert "".join(e.text for e in seen if e.kind == "text") == text
    assert len([e for e in seen if e.kind == "text"]) > 5
    assert [m.role for m in log.messages] == ["system", "user", "assistant"]
    (usage,) = events(log, "usage")
    assert usage.get("prompt_tokens") == 321 and usage.get("turn") == 1 and usage.get("estimate") > 0
    (request,) = server.chat_requests
    body = request.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert [t["function"]["name"] for t in body["tools"]] == ["bash", "read_file", "write_file"]
    assert body["messages"][0]["content"].startswith(STATIC)
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert server.problems == [] and script.problems == []
    assert [e.kind for e in seen][-1] == "final"
    assert result.session_path.parent == (tmp_path / ".agent" / "sessions").resolve()
    assert result.session_path.name.endswith(f"-{result.session_id[:8]}.jsonl")


async def test_the_volatile_layer_rides_in_front_of_the_latest_user_message(tmp_path):
    script = Script([Reply(text="ok")])
    with serve(script) as server:
        await run(server, tmp_path, prompt="What is the date?")
    messages = server.chat_requests[0].messages
    user = messages[-1]
    assert user["role"] == "user" and user["content"].startswith("[Context for this turn]\nDate: ")
    assert user["content"].endswith("\n\nWhat is the date?")
    assert "[Context for this turn]" not in messages[0]["content"]


async def test_the_static_layer_is_byte_identical_across_sessions(tmp_path):
    script = Script([Reply(text="one"), Reply(text="two")])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with serve(script) as server:
        await run(server, tmp_path / "a")
        await run(server, tmp_path / "b")
    first, second = (r.messages[0]["content"] for r in server.chat_requests)
    assert first.startswith(STATIC) and second.startswith(STATIC)
    assert first != second  # the session layer differs (id, workspace), the static one does not


# tools


async def test_parallel_tool_calls_run_concurrently_and_pair_with_their_results(tmp_path):
    (tmp_path / "notes.txt").write_text("".join(f"line {i}\n" for i in range(1, 51)))
    calls = Reply.calls(bash("sleep 1; echo first"), bash("sleep 1; echo second"),
                        ScriptedToolCall("read_file", {"path": "notes.txt", "start_line": 10, "end_line": 12}),
                        interleave_calls=True, chunk_size=5)
    script = Script([calls, Reply(text="Both ran.")])
    with serve(script, window=8000) as server:
        started = time.monotonic()
        result, log, seen = await run(server, tmp_path)
        elapsed = time.monotonic() - started
    assert result.answer == "Both ran."
    assert elapsed < 1.9, f"two 1 s commands took {elapsed:.2f} s: not concurrent"
    assistant = log.messages[2]
    tools = [m for m in log.messages if m.role == "tool"]
    assert sorted(m.tool_call_id for m in tools) == sorted(c.id for c in assistant.tool_calls)
    by_id = {m.tool_call_id: m for m in tools}
    first, second, read = assistant.tool_calls
    assert "first" in by_id[first.id].content and by_id[first.id].meta["source"]["exit_code"] == 0
    assert "second" in by_id[second.id].content
    assert by_id[read.id].content.splitlines()[:4] == ["[notes.txt: lines 10-12 of 50]", "line 10", "line 11",
                                                       "line 12"]
    assert by_id[read.id].meta["source"]["tool"] == "read_file"
    assert [e.kind for e in seen].count("tool_start") == 3 and [e.kind for e in seen].count("tool_end") == 3
    follow_up = server.chat_requests[1].messages
    assert [m["role"] for m in follow_up] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert server.problems == []


async def test_a_flood_is_cut_at_the_source_and_spilled_in_full(tmp_path):
    script = Script([Reply.calls(bash("seq 1 100000")), Reply(text="Counted.")])
    with serve(script, window=8000) as server:
        result, log, _ = await run(server, tmp_path)
    tool = next(m for m in log.messages if m.role == "tool")
    source = tool.meta["source"]
    assert source["dropped_lines"] > 99_000 and source["total_lines"] == 100_000
    spill = tmp_path / source["spill"]
    assert spill.read_bytes() == "".join(f"{i}\n" for i in range(1, 100_001)).encode()
    assert "lines truncated for context efficiency" in tool.content and source["spill"] in tool.content
    assert heuristic_tokens(server.chat_requests[1].messages) <= 8000


async def test_empty_and_repeated_tool_call_ids_are_made_unique(tmp_path):
    # llama.cpp-style ids: the same "call_0" in every reply, and twice in one reply
    script = Script([
        Reply.calls(bash("echo a", id="call_0"), bash("echo b", id="call_0")),
        Reply.calls(bash("echo c", id="call_0")),
        Reply(text="done"),
    ])
    with serve(script) as server:
        _, log, _ = await run(server, tmp_path)
    ids = [c.id for m in log.messages for c in m.tool_calls]
    assert len(ids) == 3 and len(set(ids)) == 3 and ids[0] == "call_0"
    results = [m.tool_call_id for m in log.messages if m.role == "tool"]
    assert sorted(results) == sorted(ids)
    assert server.problems == [] and [r.reply.status for r in server.chat_requests] == [200, 200, 200]


async def test_a_broken_tool_call_gets_an_error_result_and_the_run_goes_on(tmp_path):
    script = Script([Reply.calls(ScriptedToolCall("bash", '{"command": "echo'),
                                 ScriptedToolCall("no_such_tool", {})),
                     Reply(text="Recovered.")])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path)
    contents = [m.content for m in log.messages if m.role == "tool"]
    assert any("invalid arguments for bash" in c for c in contents)
    assert any("unknown tool 'no_such_tool'" in c for c in contents)
    assert result.answer == "Recovered."


# approval


async def test_a_denied_call_does_not_run_and_the_model_is_told_how_to_allow_it(tmp_path):
    asked = []

    def approve(call):
        asked.append(call.name)
        return False

    script = Script([Reply.calls(ScriptedToolCall("write_file", {"path": "out.txt", "content": "x"}),
                                 ScriptedToolCall("read_file", {"path": "missing.txt"})),
                     Reply(text="I was not allowed.")])
    with serve(script) as server:
        result, log, seen = await run(server, tmp_path, auto_approve=False, approve=approve)
    assert asked == ["write_file"]  # read_file changes nothing: no question
    assert not (tmp_path / "out.txt").exists()
    denied = next(m for m in log.messages if m.role == "tool" and m.name == "write_file")
    assert denied.content.startswith("Denied: write_file was not run because the user declined it")
    assert "--yes" in denied.content and denied.meta["source"]["denied"] is True
    assert result.answer == "I was not allowed."
    assert any(e.kind == "tool_end" and e.result.meta.get("denied") for e in seen)


async def test_an_async_approver_grants_the_call(tmp_path):
    async def approve(call):
        return True

    script = Script([Reply.calls(ScriptedToolCall("write_file", {"path": "out.txt", "content": "hello\n"})),
                     Reply(text="Written.")])
    with serve(script) as server:
        await run(server, tmp_path, auto_approve=False, approve=approve)
    assert (tmp_path / "out.txt").read_text() == "hello\n"


async def test_without_an_approver_calls_that_change_things_are_denied(tmp_path):
    script = Script([Reply.calls(bash("touch made-it")), Reply(text="ok")])
    with serve(script) as server:
        _, log, _ = await run(server, tmp_path, auto_approve=False)
    assert not (tmp_path / "made-it").exists()
    tool = next(m for m in log.messages if m.role == "tool")
    assert "not a terminal, and --yes was not given" in tool.content and "--yes" in tool.content


# failures and retries


async def test_a_429_is_retried_after_the_retry_after_delay(tmp_path):
    script = Script([Reply.rate_limit(retry_after=0.3), Reply(text="after the wait")])
    with serve(script) as server:
        started = time.monotonic()
        result, log, seen = await run(server, tmp_path)
        elapsed = time.monotonic() - started
    assert result.answer == "after the wait" and elapsed >= 0.3
    (error,) = events(log, "error", kind="rate_limit")
    assert error.get("status") == 429 and error.get("retry_in_s") == 0.3 and error.get("attempt") == 1
    assert "Rate limit reached" in error.get("message")
    assert [e.kind for e in seen].count("retry") == 1
    first, second = server.chat_requests
    assert first.body["messages"] == second.body["messages"]  # the same request, sent again


async def test_a_500_backs_off_and_retries(tmp_path):
    script = Script([Reply.server_error(), Reply.server_error(), Reply(text="third time lucky")])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path, retry_base_s=0.05, retry_cap_s=1.0)
    assert result.answer == "third time lucky"
    waits = [e.get("retry_in_s") for e in events(log, "error", kind="server_error")]
    assert len(waits) == 2 and waits[1] > waits[0]  # exponential (jitter takes at most 20% off)


async def test_transient_failures_give_up_after_the_bounded_budget(tmp_path):
    script = Script([Reply.server_error()] * 10)
    with serve(script) as server:
        with pytest.raises(AgentError, match="gave up after 3 failed attempts: HTTP 500") as err:
            await run(server, tmp_path, max_retries=2)
        assert len(server.chat_requests) == 3
    log = load(err.value.session_path)
    assert [e.get("action") for e in events(log, "error", kind="server_error")] == [None, None, "give up"]


async def test_an_authentication_error_is_not_retried(tmp_path):
    unauthorized = Reply(status=401, error={"message": "Incorrect API key provided", "type": "invalid_request_error",
                                            "param": None, "code": "invalid_api_key"})
    script = Script([unauthorized, Reply(text="never")])
    with serve(script) as server:
        with pytest.raises(AgentError, match="HTTP 401: Incorrect API key provided"):
            await run(server, tmp_path)
        assert len(server.chat_requests) == 1


def tool_steps(n: int, lines: int = 600):
    return [Reply.calls(bash(f"seq {k * 100000} {k * 100000 + lines}")) for k in range(1, n + 1)]


async def test_a_context_length_error_forces_a_deep_compaction_and_one_smaller_retry(tmp_path):
    script = Script([*tool_steps(4, 300), Reply.context_length_exceeded(window=4000), Reply(text="Fits now.")])
    with serve(script, window=4000) as server:
        result, log, seen = await run(server, tmp_path, window=4000)
    assert result.answer == "Fits now."
    rejected, retried = agent_requests(server)[-2:]
    assert rejected.reply.status == 400
    assert heuristic_tokens(retried.messages) < heuristic_tokens(rejected.messages)
    assert any(m["content"].startswith(SUMMARY_HEADER) or SUMMARY_HEADER in m["content"]
               for m in retried.messages if m["role"] == "user")
    assert not any(SUMMARY_HEADER in (m["content"] or "") for m in rejected.messages)
    (compaction,) = events(log, "compaction")
    assert compaction.get("trigger") == "context_length" and compaction.get("summarizer").startswith("llm:")
    (error,) = events(log, "error", kind="context_length")
    assert error.get("status") == 400 and error.get("action") == "retry after a deep compaction"
    assert any(e.kind == "compaction" for e in seen)
    assert server.problems == [] and script.problems == []


async def test_a_second_context_length_error_ends_the_run(tmp_path):
    script = Script([*tool_steps(3, 300), Reply.context_length_exceeded(), Reply.context_length_exceeded()])
    with serve(script) as server:
        with pytest.raises(AgentError, match="too long even after a deep compaction"):
            await run(server, tmp_path, window=4000)


async def test_a_413_counts_as_a_context_length_error(tmp_path):
    script = Script([*tool_steps(3, 300), Reply.payload_too_large(), Reply(text="ok")])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path, window=4000)
    assert result.answer == "ok"
    assert events(log, "compaction", trigger="context_length")


async def test_a_stream_cut_midway_leaves_a_valid_log_with_the_partial_reply_marked(tmp_path):
    script = Script([
        Reply.calls(bash("echo hi")),
        Reply.cut_stream("This reply is going to be cut off before it ends.", after=4, chunk_size=6),
        Reply(text="The complete answer."),
    ])
    with serve(script, window=8000) as server:
        result, log, seen = await run(server, tmp_path)
        assert_log_valid(log, resolve_policy(agent_config(server, tmp_path)))
    assert result.answer == "The complete answer."
    partial = next(m for m in log.messages if (m.meta or {}).get("partial"))
    assert partial.role == "assistant" and partial.content == "This reply is goin"  # 3 chunks of 6
    assert "connection" in partial.meta["error"]
    (cut,) = events(log, "error", kind="stream_cut")
    assert cut.get("retry_in_s") is not None
    after = agent_requests(server)[-1].messages
    assert not any("going to be cut" in (m.get("content") or "") for m in after)
    assert server.problems == []


async def test_a_stream_cut_inside_tool_call_arguments_is_logged_partial_and_never_sent(tmp_path):
    cut = Reply.calls(bash("echo 'a long command line that streams in many pieces'"), chunk_size=4, cut_after=6)
    script = Script([cut, Reply.calls(bash("echo again")), Reply(text="done")])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path)
    partial = next(m for m in log.messages if (m.meta or {}).get("partial"))
    assert partial.tool_calls and not partial.tool_calls[0].arguments.endswith("}")
    assert not any(m.tool_call_id == partial.tool_calls[0].id for m in log.messages if m.role == "tool")
    assert result.answer == "done" and server.problems == []


async def test_a_stream_that_ends_without_a_finish_reason_is_treated_as_cut(tmp_path):
    script = Script([Reply.cut_stream("half a reply", after=2, cut_abruptly=False), Reply(text="whole reply")])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path)
    assert result.answer == "whole reply"
    assert events(log, "error", kind="stream_cut")[0].get("message") == \
        "stream cut: the stream ended without a finish reason"


async def test_the_step_limit_stops_the_run_with_a_clear_error(tmp_path):
    script = Script([Reply.calls(bash("true"))] * 5)
    with serve(script) as server:
        with pytest.raises(AgentError, match="stopped after 2 steps without a final answer"):
            await run(server, tmp_path, max_steps=2)


# replay


async def test_replaying_the_log_gives_back_every_request_the_server_received(tmp_path):
    script = Script([
        *tool_steps(3, 400),
        Reply.rate_limit(retry_after=0),
        Reply.cut_stream("cut here, then the retry", after=3),
        Reply.calls(ScriptedToolCall("write_file", {"path": "big.txt", "content": "y" * 6000})),
        *tool_steps(2, 500),
        Reply.context_length_exceeded(),
        Reply(text="Replayable."),
    ])
    with serve(script, window=5000) as server:
        async with AgentSession(agent_config(server, tmp_path, window=5000)) as agent:
            await agent.send("Replay me.")
            policy = agent.policy
        received = [strip_volatile(r.messages) for r in answered(server)]
    log = load(agent.path)
    replayed = replayed_requests(log, policy)
    assert len(replayed) == len(received) == log.turn_count()
    for turn, (want, got) in enumerate(zip(received, replayed), 1):
        assert got == want, f"turn {turn} differs"
    assert events(log, "compaction") and events(log, "usage")


async def test_a_session_takes_several_user_messages(tmp_path):
    script = Script([Reply(text="first answer"), Reply.calls(bash("echo x")), Reply(text="second answer")])
    with serve(script) as server:
        async with AgentSession(agent_config(server, tmp_path)) as agent:
            assert await agent.send("one") == "first answer"
            assert await agent.send("two") == "second answer"
        requests = [r.messages for r in server.chat_requests]
    last = requests[-1]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "tool"]
    # what was sent stays as sent: "one" keeps the layer it went out with, "two" has its own,
    # and each request starts with the whole previous one
    assert last[1] == requests[0][1] and last[1]["content"].endswith("\n\none")
    assert last[3]["content"].startswith("[Context for this turn]") and last[3]["content"].endswith("\n\ntwo")
    for before, after in zip(requests, requests[1:]):
        assert after[: len(before)] == before


async def test_manual_controls_are_logged_and_obeyed(tmp_path):
    script = Script([*tool_steps(3, 300), Reply(text="a"), Reply(text="b")])
    with serve(script, window=6000) as server:   # small enough that the kept tail leaves history to summarize
        async with AgentSession(agent_config(server, tmp_path, window=6000)) as agent:
            await agent.send("one")
            comp = await agent.compact_now()
            assert comp is not None and comp.trigger == "manual"
            await agent.add_event("trigger", {"stage": "mask"})
            await agent.send("two")
        last = server.chat_requests[-1].messages
    assert any(SUMMARY_HEADER in (m.get("content") or "") for m in last)
    log = load(agent.path)
    assert events(log, "compaction", trigger="manual") and events(log, "trigger", stage="mask")


def test_the_module_is_importable_without_textual():
    import subprocess
    import sys

    code = "import sys, breakwater.agent, breakwater.cli.agent; print('textual' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_a_request_that_exceeds_the_window_is_never_sent(tmp_path):
    script = Script([Reply(text="never")])
    with serve(script) as server:
        with pytest.raises(AgentError, match="over the window of 300; a request that exceeds the window is never sent"):
            await run(server, tmp_path, window=300, prompt="Do the task. " * 200)  # the prompt alone is larger
        assert server.chat_requests == []
    (log_path,) = (tmp_path / ".agent" / "sessions").iterdir()
    (error,) = events(load(log_path), "error", kind="window")
    assert error.get("window") == 300 and error.get("sent_tokens") > 300


async def test_an_empty_reply_ends_the_turn_with_an_empty_answer(tmp_path):
    script = Script([Reply(text="")])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path)
    assert result.answer == "" and events(log, "note", kind="empty_reply")


async def test_cancelling_mid_stream_logs_the_partial_reply_and_the_session_goes_on(tmp_path):
    import asyncio

    script = Script([Reply(text="slow words " * 40, chunk_size=5, chunk_delay=0.03), Reply(text="after")])
    with serve(script) as server:
        async with AgentSession(agent_config(server, tmp_path)) as agent:
            arrived = asyncio.Event()
            agent.on_event = lambda ev: arrived.set() if ev.kind == "text" else None
            task = asyncio.create_task(agent.send("start"))
            await asyncio.wait_for(arrived.wait(), 10)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await agent.send("again") == "after"
            policy = agent.policy
        last = server.chat_requests[-1].messages
    log = load(agent.path)
    partial = next(m for m in log.messages if (m.meta or {}).get("partial"))
    assert partial.meta["error"] == "cancelled" and partial.content.startswith("slow")
    assert not any("slow words" in (m.get("content") or "") for m in last)
    assert_log_valid(log, policy)


class SmallerProvider(Script):
    """A provider whose real window is smaller than the session's: a request over it gets the
    provider's context-length error (naming its window), like OpenAI's or vLLM's."""

    def __init__(self, window: int, steps):
        super().__init__(steps)
        self.window = window
        self.rejected: list[int] = []

    def __call__(self, body):
        from agent_support import is_summary_request

        tokens = heuristic_tokens(body["messages"])
        if not is_summary_request(body) and tokens > self.window:
            self.rejected.append(tokens)
            return Reply.context_length_exceeded(window=self.window, requested=tokens)
        return super().__call__(body)


async def test_a_context_length_error_naming_a_smaller_window_is_learnt_and_kept_to(tmp_path):
    provider = SmallerProvider(5000, [*tool_steps(14, 300), Reply(text="Fits now."), Reply(text="and still")])
    with serve(provider) as server:
        result, log, seen = await run(server, tmp_path)      # the session's window: 128,000
        received = [strip_volatile(r.messages) for r in answered(server)]
        policy = resolve_policy(agent_config(server, tmp_path), None)
    # a replay of the log keeps to the learnt window from where it was learnt, as the session did
    assert replayed_requests(log, policy) == received
    assert result.answer == "Fits now."
    assert len(provider.rejected) == 1                        # once: the window was learnt from it
    (config,) = events(log, "config")
    assert config.get("window") == 5000 and config.get("was") == 128000
    (error,) = events(log, "error", kind="context_length")
    assert error.get("provider_window") == 5000
    assert events(log, "compaction", trigger="context_length")
    assert all(heuristic_tokens(r.messages) <= 5000 for r in answered(server))
    said = [e.text for e in seen if e.kind == "retry"]
    assert said == ["the provider's context window is 5,000 tokens, not 128,000: the session keeps to it from now on"]
    requests = [e.view for e in seen if e.kind == "request"]
    assert requests[-1].window == 5000                       # the gauge and the status line follow
    assert server.problems == [] and provider.problems == []
