"""The fake OpenAI server speaks the wire format the real `openai` client expects.

Every test drives the real client (sync and async) over HTTP on 127.0.0.1, so what the agent's
tests build on is proven here: streamed text and parallel tool calls reassemble, usage arrives
in the last chunk, each failure becomes the exception the agent handles, and `check_request`
catches every request shape a provider would reject.
"""

from __future__ import annotations

import json

import httpx2
import openai
import pytest

from support.fake_openai import FakeOpenAIServer, Reply, ScriptedToolCall
from support.fixtures import fake_openai  # noqa: F401 - the fixture
from support.request_checks import check_request, heuristic_tokens

KEY = "sk-test-fake-0123456789"
USER = [{"role": "user", "content": "Say hello."}]


def sync_client(server: FakeOpenAIServer, **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=kw.pop("max_retries", 0), **kw)


def async_client(server: FakeOpenAIServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)


def stream(server: FakeOpenAIServer, messages=USER, **kw) -> list:
    with sync_client(server) as client:
        return list(client.chat.completions.create(model="fake-model", messages=messages, stream=True, **kw))


def text_of(chunks) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def assemble_calls(chunks) -> list[dict]:
    """How an agent rebuilds streamed tool calls: by index, name once, arguments appended."""
    calls: dict[int, dict] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or ():
                call = calls.setdefault(delta.index, {"id": None, "name": "", "arguments": ""})
                if delta.id:
                    call["id"] = delta.id
                if delta.function and delta.function.name:
                    call["name"] += delta.function.name
                if delta.function and delta.function.arguments:
                    call["arguments"] += delta.function.arguments
    return [calls[i] for i in sorted(calls)]


def finish_reasons(chunks) -> list[str]:
    return [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]


# streaming


def test_streamed_text_arrives_in_several_chunks_and_reassembles():
    text = "Hello from the fake model — streamed in pieces."
    with FakeOpenAIServer([Reply(text=text, chunk_size=5)]) as server:
        chunks = stream(server)
    content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content_chunks) == len(text) // 5 + 1
    assert text_of(chunks) == text
    assert chunks[0].choices[0].delta.role == "assistant"
    assert finish_reasons(chunks) == ["stop"]


async def test_async_client_reassembles_streamed_text():
    with FakeOpenAIServer([Reply(text="async hello, world")]) as server:
        async with async_client(server) as client:
            response = await client.chat.completions.create(model="fake-model", messages=USER, stream=True)
            chunks = [chunk async for chunk in response]
    assert text_of(chunks) == "async hello, world"


@pytest.mark.parametrize("interleave", [False, True], ids=["one-by-one", "interleaved"])
def test_parallel_tool_calls_stream_and_reassemble(interleave):
    long_args = {"path": "src/app/very/long/module_name.py", "start_line": 1, "end_line": 400}
    reply = Reply.calls(
        ScriptedToolCall("read_file", long_args, id="call_read"),
        ("bash", {"command": "pytest -q tests/ && echo done"}),
        text="Let me look.",
        interleave_calls=interleave,
        chunk_size=6,
    )
    with FakeOpenAIServer([reply]) as server:
        chunks = stream(server)

    first_deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or () if d.id]
    assert [(d.index, d.type, d.function.name, d.function.arguments) for d in first_deltas] == [
        (0, "function", "read_file", ""), (1, "function", "bash", "")]
    fragments = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or () if not d.id]
    assert all(d.function.name is None and d.type is None for d in fragments)
    assert len(fragments) > 4
    calls = assemble_calls(chunks)
    assert [c["name"] for c in calls] == ["read_file", "bash"]
    assert calls[0]["id"] == "call_read" and calls[1]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"]) == long_args
    assert json.loads(calls[1]["arguments"]) == {"command": "pytest -q tests/ && echo done"}
    assert text_of(chunks) == "Let me look."
    assert finish_reasons(chunks) == ["tool_calls"]


async def test_async_client_reassembles_parallel_tool_calls():
    reply = Reply.calls(("a", {"x": 1}), ("b", {"y": "two"}), ("c", "{}"))
    with FakeOpenAIServer([reply]) as server:
        async with async_client(server) as client:
            response = await client.chat.completions.create(model="fake-model", messages=USER, stream=True)
            chunks = [chunk async for chunk in response]
    calls = assemble_calls(chunks)
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("a", {"x": 1}), ("b", {"y": "two"}), ("c", {})]
    assert len({c["id"] for c in calls}) == 3


def test_usage_arrives_in_the_final_chunk_with_include_usage():
    with FakeOpenAIServer([Reply(text="four score and seven"), Reply(text="no usage")]) as server:
        chunks = stream(server, stream_options={"include_usage": True})
        without = stream(server)
    *body, last = chunks
    assert last.choices == [] and last.usage is not None
    assert all(c.usage is None for c in body)
    messages_chars = len("Say hello.")
    assert last.usage.prompt_tokens == messages_chars // 4
    assert last.usage.completion_tokens == len("four score and seven") // 4
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert all(c.usage is None for c in without)


def test_prompt_tokens_come_from_a_pluggable_counter():
    # A provider whose tokenizer counts 1.5x the local heuristic: what calibration must learn.
    def counter(messages):
        return int(heuristic_tokens(messages) * 1.5)

    messages = [{"role": "system", "content": "You are terse." * 20}, *USER]
    with FakeOpenAIServer([Reply(text="ok"), Reply(text="ok", prompt_tokens=7)], usage_counter=counter) as server:
        last = stream(server, messages, stream_options={"include_usage": True})[-1]
        fixed = stream(server, messages, stream_options={"include_usage": True})[-1]
    assert last.usage.prompt_tokens == int(heuristic_tokens(messages) * 1.5)
    assert fixed.usage.prompt_tokens == 7


def test_non_streaming_reply_carries_text_tool_calls_and_usage():
    reply = Reply.calls(("read_file", {"path": "README.md"}), text="Reading.", finish_reason="tool_calls")
    with FakeOpenAIServer([reply]) as server, sync_client(server) as client:
        completion = client.chat.completions.create(model="fake-model", messages=USER)
    message = completion.choices[0].message
    assert message.content == "Reading."
    assert message.tool_calls[0].function.name == "read_file"
    assert json.loads(message.tool_calls[0].function.arguments) == {"path": "README.md"}
    assert completion.choices[0].finish_reason == "tool_calls"
    assert completion.usage.total_tokens > 0


def test_models_are_listed():
    with FakeOpenAIServer(models=["small", "big"]) as server, sync_client(server) as client:
        assert [m.id for m in client.models.list()] == ["small", "big"]


def test_responder_answers_from_the_request():
    def echo(body):
        return Reply(text=body["messages"][-1]["content"].upper())

    with FakeOpenAIServer(responder=echo) as server:
        assert text_of(stream(server, [{"role": "user", "content": "shout"}])) == "SHOUT"
        assert text_of(stream(server, [{"role": "user", "content": "again"}])) == "AGAIN"


def test_requests_are_recorded_with_headers_and_body(fake_openai):  # noqa: F811 - the fixture
    fake_openai.queue(Reply(text="ok"))
    stream(fake_openai, stream_options={"include_usage": True})
    (request,) = fake_openai.requests
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["messages"] == USER and request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.problems == () and request.reply == Reply(text="ok")
    assert fake_openai.pending == 0


def test_an_exhausted_script_answers_500_naming_it():
    with FakeOpenAIServer() as server, pytest.raises(openai.InternalServerError, match="exhausted"):
        stream(server)


# failures


def test_rate_limit_raises_rate_limit_error_with_retry_after():
    with FakeOpenAIServer([Reply.rate_limit(retry_after=3)]) as server, pytest.raises(openai.RateLimitError) as err:
        stream(server)
    assert err.value.status_code == 429
    assert err.value.response.headers["retry-after"] == "3"
    assert err.value.code == "rate_limit_exceeded"


def test_the_client_honours_retry_after_and_then_succeeds():
    with FakeOpenAIServer([Reply.rate_limit(retry_after=0.05), Reply(text="after the wait")]) as server:
        with sync_client(server, max_retries=1) as client:
            chunks = list(client.chat.completions.create(model="fake-model", messages=USER, stream=True))
        assert text_of(chunks) == "after the wait"
        assert len(server.requests) == 2


def test_server_error_raises_internal_server_error():
    with FakeOpenAIServer([Reply.server_error()]) as server, pytest.raises(openai.InternalServerError) as err:
        stream(server)
    assert err.value.status_code == 500


async def test_async_client_raises_the_same_errors():
    with FakeOpenAIServer([Reply.rate_limit(), Reply.server_error()]) as server:
        async with async_client(server) as client:
            with pytest.raises(openai.RateLimitError):
                await client.chat.completions.create(model="fake-model", messages=USER, stream=True)
            with pytest.raises(openai.InternalServerError):
                await client.chat.completions.create(model="fake-model", messages=USER, stream=True)


def test_context_length_error_is_a_bad_request_with_its_code():
    with FakeOpenAIServer([Reply.context_length_exceeded(window=8192, requested=9000)]) as server:
        with pytest.raises(openai.BadRequestError) as err:
            stream(server)
    assert err.value.code == "context_length_exceeded"
    assert err.value.body["code"] == "context_length_exceeded"
    assert "maximum context length is 8192 tokens" in err.value.message


def test_payload_too_large_is_an_api_status_error_413():
    with FakeOpenAIServer([Reply.payload_too_large()]) as server, pytest.raises(openai.APIStatusError) as err:
        stream(server)
    assert err.value.status_code == 413
    assert type(err.value) is openai.APIStatusError


def test_cut_stream_yields_the_first_chunks_then_raises_a_connection_error():
    with FakeOpenAIServer([Reply.cut_stream("Hello world, this reply never finishes.", after=3, chunk_size=5)]) as server:
        with sync_client(server) as client:
            response = client.chat.completions.create(model="fake-model", messages=USER, stream=True)
            received = []
            with pytest.raises(openai.APIConnectionError) as err:
                for chunk in response:
                    received.append(chunk)
    assert text_of(received) == "Hello worl"  # the role chunk, then two content chunks
    assert isinstance(err.value.__cause__, httpx2.RemoteProtocolError)


async def test_async_cut_stream_raises_a_connection_error_too():
    with FakeOpenAIServer([Reply.cut_stream("Hello world, this reply never finishes.", after=2)]) as server:
        async with async_client(server) as client:
            response = await client.chat.completions.create(model="fake-model", messages=USER, stream=True)
            received = []
            with pytest.raises(openai.APIConnectionError):
                async for chunk in response:
                    received.append(chunk)
    assert len(received) == 2


def test_a_stream_that_ends_cleanly_without_done_raises_nothing():
    # What the agent must detect itself: no exception, and no finish_reason either.
    with FakeOpenAIServer([Reply.cut_stream("half a reply", after=2, cut_abruptly=False)]) as server:
        chunks = stream(server)
    assert len(chunks) == 2 and finish_reasons(chunks) == []


def test_malformed_sse_data_raises_a_json_error_in_the_client():
    with FakeOpenAIServer([Reply(text="Hello world", malformed_after=2, chunk_size=5)]) as server:
        with sync_client(server) as client:
            response = client.chat.completions.create(model="fake-model", messages=USER, stream=True)
            received = []
            with pytest.raises(json.JSONDecodeError):
                for chunk in response:
                    received.append(chunk)
    assert text_of(received) == "Hello"


async def test_keep_alive_comments_reset_the_read_timeout_and_carry_nothing():
    import time

    reply = Reply(text="never sent", keepalive_after=1, keepalive_every=0.05, keepalive_for=1.0)
    with FakeOpenAIServer([reply]) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=0.5)
        async with client:
            t0 = time.monotonic()
            response = await client.chat.completions.create(model="fake-model", messages=USER, stream=True)
            received = [chunk async for chunk in response]
    assert time.monotonic() - t0 >= 1.0  # twice the read timeout, and no timeout error
    assert len(received) == 1 and text_of(received) == ""


def test_lone_surrogates_go_out_as_json_escapes():
    with FakeOpenAIServer([Reply(text="a\ud800b", chunk_size=50)]) as server:
        chunks = stream(server)
    assert text_of(chunks) == "a\ud800b"


def test_an_error_body_can_echo_the_key_the_client_sent():
    with FakeOpenAIServer([Reply.invalid_key(500)]) as server:
        with sync_client(server) as client:
            with pytest.raises(openai.InternalServerError) as err:
                client.chat.completions.create(model="fake-model", messages=USER)
    assert KEY in str(err.value)


# request checks


def call(call_id: str, name: str = "bash") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def body(*messages: dict, **extra) -> dict:
    return {"model": "fake-model", "messages": list(messages), **extra}


SYSTEM = {"role": "system", "content": "STATIC: you are an agent."}
ASK = {"role": "user", "content": "List the files."}
CALLS = {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2", "read_file")]}
RESULT_1 = {"role": "tool", "tool_call_id": "c1", "content": "a.py"}
RESULT_2 = {"role": "tool", "tool_call_id": "c2", "content": "print(1)"}
ANSWER = {"role": "assistant", "content": "Done."}
VALID = body(SYSTEM, ASK, CALLS, RESULT_2, RESULT_1, ANSWER, {"role": "user", "content": "Thanks."})


def test_a_valid_request_has_no_problems():
    assert check_request(VALID, window=1000, static_prefix="STATIC:") == []


@pytest.mark.parametrize(
    ("request_body", "kwargs", "expected"),
    [
        (body(SYSTEM, ASK, RESULT_1), {}, "no matching preceding call"),
        (body(SYSTEM, ASK, CALLS, RESULT_1, ANSWER), {}, "'c2' of messages[2] is never answered"),
        (body(SYSTEM, ASK, CALLS, RESULT_1), {}, "'c2' of messages[2] is never answered"),
        (body(SYSTEM, ASK, CALLS, RESULT_1, RESULT_2, RESULT_2), {}, "answers tool call 'c2' a second time"),
        (body(ASK, SYSTEM), {}, "messages[1] is a system message but not the first"),
        (body(SYSTEM, ASK, CALLS, RESULT_1, RESULT_2, {**CALLS, "content": "again"}, RESULT_1, RESULT_2), {},
         "tool call id 'c1' in messages[5] is not unique"),
        (body(SYSTEM, {"role": "user", "content": "x" * 4000}), {"window": 500}, "over the window of 500"),
        (body({"role": "system", "content": "STATIC\n[Retrieved Memory]\nfact"}, ASK), {},
         "[Retrieved Memory] block is inside the system message"),
        (body(SYSTEM, {"role": "user", "content": "[Project History]\n## Session 1"}), {},
         "[Project History] block is in messages[1], not in the system message"),
        (body({"role": "system", "content": "hello"}, ASK), {"static_prefix": "STATIC:"},
         "does not start with the static prompt layer"),
        (body(ASK), {"static_prefix": "STATIC:"}, "no system message carrying the static prompt layer"),
        (body(), {}, "messages must be a non-empty list"),
        (body({"role": "function", "content": "x"}), {}, "invalid role 'function'"),
        (body({"role": "user", "content": [{"type": "refusal", "refusal": "no"}]}), {}, "invalid type 'refusal'"),
        (body({"role": "user", "content": None}), {}, "(user) has null content"),
        (body({"role": "user", "content": {"text": "hi"}}), {}, "content is a dict"),
        (body(ASK, {"role": "assistant", "content": None, "tool_calls": []}), {}, "empty tool_calls list"),
        (body(ASK, {"role": "assistant", "content": "", "tool_calls": [{"id": "c9", "type": "function",
                                                                        "function": {"name": "f", "arguments": {}}}]},
              {"role": "tool", "tool_call_id": "c9", "content": "ok"}), {}, "arguments are not a JSON string"),
        (body(ASK, stream_options={"include_usage": True}), {}, "stream_options is only allowed when stream is true"),
        ({"messages": [ASK]}, {}, "model is missing"),
    ],
    ids=[
        "orphan-tool-result", "unanswered-call-before-assistant", "unanswered-call-at-end", "answered-twice",
        "system-not-first", "duplicate-call-id", "over-window", "retrieved-memory-in-system",
        "project-history-outside-system", "static-prefix-missing", "no-system-for-static-layer", "no-messages",
        "invalid-role", "invalid-part-type", "null-user-content", "content-not-string", "empty-tool-calls",
        "arguments-not-string", "stream-options-without-stream", "no-model",
    ],
)
def test_check_request_catches_invalid_shapes(request_body, kwargs, expected):
    problems = check_request(request_body, **kwargs)
    assert any(expected in p for p in problems), problems


def test_project_history_must_come_before_retrieved_memory():
    system = {"role": "system", "content": "STATIC\n[Project History]\n## Session ab12cd34 (2025-01-01 10:00)\n..."}
    memory = {"role": "user", "content": "[Retrieved Memory]\nfact\n[Use this context if relevant to the current task.]"}
    assert check_request(body(system, memory, ASK), static_prefix="STATIC") == []
    inverted = {"role": "system", "content": "STATIC\n[Retrieved Memory]\nfact\n[Project History]\n..."}
    problems = check_request(body(inverted, ASK))
    assert any("comes before the [Project History]" in p for p in problems), problems
    assert any("inside the system message" in p for p in problems), problems


def test_markers_quoted_mid_line_are_not_blocks():
    quoted = {"role": "tool", "tool_call_id": "c1", "content": 'grep: src/x.py: s = "[Retrieved Memory]"'}
    request = body(SYSTEM, ASK, {"role": "assistant", "content": None, "tool_calls": [call("c1")]}, quoted)
    assert check_request(request) == []


def test_window_uses_the_spec_heuristic_unless_given_a_counter():
    request = body({"role": "user", "content": "abcdefgh"}, {"role": "assistant", "content": "中文字符"},
                   {"role": "assistant", "content": None,
                    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                   {"role": "tool", "tool_call_id": "c", "content": ""})
    # (8//4+1+4) + (4//2+1+4) + (0+1+4 + (4//4+1) + (2//4+1) + 10) + (0+1+4)
    assert heuristic_tokens(request["messages"]) == 7 + 7 + 18 + 5
    assert check_request(request, window=37) == []
    assert check_request(request, window=36) == ["request is 37 tokens, over the window of 36"]
    assert check_request(request, window=36, counter=lambda messages: 10) == []


def test_the_authorization_header_must_carry_the_key():
    assert check_request(VALID, headers={"Authorization": f"Bearer {KEY}"}, api_key=KEY) == []
    assert check_request(VALID, headers={}) == ["Authorization header with a bearer key is missing"]
    assert check_request(VALID, headers={"authorization": "Bearer other"}, api_key=KEY) == [
        "Authorization header does not carry the configured key"]


def test_the_server_records_the_problems_of_each_request():
    bad = [ASK, {"role": "tool", "tool_call_id": "ghost", "content": "x"}]
    with FakeOpenAIServer([Reply(text="one"), Reply(text="two")], api_key=KEY) as server:
        stream(server, USER)
        stream(server, bad)
    first, second = server.requests
    assert first.problems == ()
    assert any("no matching preceding call" in p for p in second.problems)
    with pytest.raises(AssertionError, match="request 1: messages\\[1\\] is a tool result"):
        server.assert_valid()


def test_strict_mode_rejects_an_invalid_request_loudly_and_keeps_the_script():
    over = [{"role": "user", "content": "word " * 400}]
    with FakeOpenAIServer([Reply(text="kept")], strict=True, window=100) as server:
        with pytest.raises(openai.BadRequestError, match="over the window of 100") as err:
            stream(server, over)
        assert err.value.code == "invalid_request_shape"
        assert text_of(stream(server)) == "kept"
    assert server.pending == 0
