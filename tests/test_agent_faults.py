"""Faults of the server the agent must ride out (issue 8 items 3, 8, 10, 11, 12): a key echoed
in an error body, lone surrogates in a reply, malformed SSE, streams that only keep alive or
never finish, and a very long streamed argument. The real `openai` client against the fake
server, real files and the real `breakwater run` subprocess where the printing matters."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import openai
from agent_support import KEY, Script, agent_config, agent_requests, events, files_containing, load, serve
from support.fake_openai import Reply, ScriptedToolCall

from breakwater.agent import AgentError, run_agent
from breakwater.agent.chat import Assembler


async def run(server, tmp_path, prompt="Do the task.", **kw):
    seen = []
    result = await run_agent(agent_config(server, tmp_path, **kw), prompt, on_event=seen.append)
    return result, load(result.session_path), seen


def breakwater_run(workspace: Path, home: Path, base_url: str, config: str = "") -> subprocess.CompletedProcess:
    (home / "config.toml").write_text('model = "fake-model"\nretry_base_s = 0.01\nretry_cap_s = 0.05\n' + config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "BREAKWATER_"))}
    env.update(HOME=str(home), OPENAI_API_KEY=KEY, BREAKWATER_CONFIG=str(home / "config.toml"))
    return subprocess.run([sys.executable, "-m", "breakwater", "run", "--prompt", "Do it.", "--workspace",
                           str(workspace), "--base-url", base_url, "--yes"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir(parents=True)
    home.mkdir()
    return workspace, home


# item 3: what is printed is redacted like the log

def test_an_error_body_echoing_the_key_is_printed_redacted(tmp_path):
    for status, config in ((401, ""), (500, "max_retries = 1\n")):
        workspace, home = dirs(tmp_path / str(status))
        with serve(Script([Reply.invalid_key(status)] * 3)) as server:
            done = breakwater_run(workspace, home, server.base_url, config)
        assert done.returncode == 1
        assert KEY not in done.stderr and KEY not in done.stdout
        assert f"HTTP {status}: Incorrect API key provided: [redacted]" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert files_containing(workspace, KEY) == []


def test_an_answer_quoting_the_key_is_printed_redacted(tmp_path):
    workspace, home = dirs(tmp_path)
    with serve(Script([Reply(text=f"Your key is {KEY}.")])) as server:
        done = breakwater_run(workspace, home, server.base_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "Your key is [redacted]."
    assert KEY not in done.stdout + done.stderr


async def test_events_for_the_watcher_carry_no_key(tmp_path):
    script = Script([Reply.invalid_key(500), Reply.calls(ScriptedToolCall("bash", {"command": f"echo {KEY}"})),
                     Reply(text="done")])
    with serve(script) as server:
        result, log, seen = await run(server, tmp_path)
    assert result.answer == "done"
    retry = next(e for e in seen if e.kind == "retry")
    assert "[redacted]" in retry.text
    shown = [e.text for e in seen if e.text] + [e.call.arguments for e in seen if e.call is not None] + \
        [e.result.content for e in seen if e.result is not None]
    assert shown and not any(KEY in s for s in shown)


# item 10: lone surrogates in a reply

async def test_a_lone_surrogate_in_a_reply_is_replaced_and_the_run_finishes(tmp_path):
    script = Script([
        Reply.calls(ScriptedToolCall("write_file", {"path": "a\ud800.txt", "content": "x\udfffy"}), text="w\ud800"),
        Reply(text="Done \ud800 and decided to keep it."),
    ])
    with serve(script) as server:
        result, log, seen = await run(server, tmp_path)
    assert result.answer == "Done \ufffd and decided to keep it."
    assert log.messages[-1].content == result.answer  # the final reply is in the log
    call = next(m for m in log.messages if m.tool_calls).tool_calls[0]
    assert json.loads(call.arguments) == {"path": "a\ufffd.txt", "content": "x\ufffdy"}
    assert (tmp_path / "a\ufffd.txt").read_text() == "x\ufffdy"
    assert events(log, "error") == []
    (end,) = events(log, "note", kind="session_end")
    assert end.get("scribe_written") >= 1
    assert "\ufffd" in (tmp_path / "PROJECT_MEMORY.md").read_text()
    assert server.problems == []


def test_a_surrogate_pair_split_across_two_chunks_becomes_its_character():
    acc = Assembler(None)
    for piece in ("smile \ud83d", "\ude00!"):
        acc.feed(openai.types.chat.ChatCompletionChunk.model_validate(chunk_with(content=piece)))
    assert acc.reply().text == "smile \U0001f600!"


# item 11: malformed SSE is a cut stream

async def test_malformed_sse_json_is_a_cut_stream_kept_partial_and_retried(tmp_path):
    script = Script([Reply(text="Half of the first try.", chunk_size=5, malformed_after=3),
                     Reply(text="The whole answer.")])
    with serve(script) as server:
        result, log, seen = await run(server, tmp_path)
    assert result.answer == "The whole answer."
    partial = next(m for m in log.messages if (m.meta or {}).get("partial"))
    assert partial.content == "Half of th" and "malformed stream" in partial.meta["error"]
    (cut,) = events(log, "error", kind="stream_cut")
    assert cut.get("message").startswith("stream cut: malformed stream: data that is not JSON")
    assert cut.get("retry_in_s") is not None and any(e.kind == "retry" for e in seen)
    assert len(agent_requests(server)) == 2 and server.problems == []


def test_malformed_sse_that_never_heals_ends_in_one_line_naming_the_session(tmp_path):
    workspace, home = dirs(tmp_path)
    with serve(Script([Reply(text="broken", malformed_after=1)] * 3)) as server:
        done = breakwater_run(workspace, home, server.base_url, "max_retries = 1\n")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("breakwater run: gave up after 2 failed attempts: stream cut: malformed stream")
    session = Path(line.rsplit("(session: ", 1)[1].rstrip(")"))
    assert len(events(load(session), "error", kind="stream_cut")) == 2


# item 12: deadlines

async def test_a_stream_of_keep_alives_only_is_stalled_and_retried(tmp_path):
    script = Script([Reply(text="never", keepalive_after=1, keepalive_every=0.05, keepalive_for=20),
                     Reply(text="Answered on the retry.")])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path, request_timeout_s=5.0, progress_timeout_s=0.5)
    assert result.answer == "Answered on the retry."
    (stall,) = events(log, "error", kind="stalled")
    assert stall.get("message") == "stream stalled: nothing new for 0.5 s" and stall.get("retry_in_s") is not None


async def test_a_request_that_never_finishes_meets_the_overall_deadline(tmp_path):
    slow = Reply(text="slowly " * 40, chunk_size=7, chunk_delay=0.1)  # progress every 0.1 s, 4 s in all
    script = Script([slow, Reply(text="Quick this time.")])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path, request_deadline_s=1.0, progress_timeout_s=0.5)
    assert result.answer == "Quick this time."
    (late,) = events(log, "error", kind="deadline")
    assert late.get("message") == "request deadline passed: no complete reply within 1 s"
    partial = next(m for m in log.messages if (m.meta or {}).get("partial"))
    assert partial.content.startswith("slowly slowly")


async def test_steady_progress_is_not_a_stall(tmp_path):
    script = Script([Reply(text="step " * 12, chunk_size=5, chunk_delay=0.2)])
    with serve(script) as server:
        result, log, _ = await run(server, tmp_path, progress_timeout_s=0.6)
    assert result.answer == "step " * 12 and events(log, "error") == []


async def test_a_server_that_never_answers_the_request_is_bounded_too(tmp_path):
    import socket

    with socket.socket() as silent:  # accepts the connection, never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        config = agent_config(SimpleNamespace(base_url=url), tmp_path, request_deadline_s=0.3, max_retries=1)
        try:
            await asyncio.wait_for(run_agent(config, "Anyone there?"), timeout=30)
        except AgentError as err:
            assert "gave up after 2 failed attempts: request deadline passed" in str(err)
        else:
            raise AssertionError("the run should give up")


# item 8: a long streamed argument

def chunk_with(content=None, arguments=None, first_call=False):
    call = None
    if arguments is not None or first_call:
        call = [{"index": 0, **({"id": "call_1", "type": "function"} if first_call else {}),
                 "function": {"name": "write_file"} if first_call else {"arguments": arguments}}]
    return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {"content": content, "tool_calls": call}, "finish_reason": None}]}


class CountingFragment(str):
    """An argument fragment that counts the string concatenations it takes part in."""

    joined = 0

    def __radd__(self, other):
        CountingFragment.joined += 1
        return str(other) + str(self)


def test_argument_fragments_are_joined_once_not_one_by_one():
    acc = Assembler(None)
    acc.feed(openai.types.chat.ChatCompletionChunk.model_validate(chunk_with(first_call=True)))
    piece = openai.types.chat.ChatCompletionChunk.model_validate(chunk_with(arguments="x"))
    piece.choices[0].delta.tool_calls[0].function.arguments = CountingFragment("0123456789" * 6 + "abcd")
    CountingFragment.joined = 0
    for _ in range(80_000):  # 5.1 MB in 64-character fragments
        acc.feed(piece)
    (call,) = acc.reply().tool_calls
    assert len(call.arguments) == 80_000 * 64 and call.arguments.startswith("0123456789")
    assert CountingFragment.joined == 0  # each += on the growing text copied all of it


async def test_a_5_mb_argument_streamed_in_fragments_arrives_whole(tmp_path):
    content = "".join(f"line {i:07d} of a very long generated file\n" for i in range(120_000))
    script = Script([Reply.calls(ScriptedToolCall("write_file", {"path": "big.txt", "content": content}),
                                 chunk_size=4096),
                     Reply(text="written")])
    with serve(script, window=4_000_000) as server:
        result, log, _ = await run(server, tmp_path, window=4_000_000)
    assert result.answer == "written"
    assert (tmp_path / "big.txt").read_text() == content


# item 13: a call without a name

async def test_a_call_without_a_name_is_answered_with_an_error_and_sent_in_a_valid_form(tmp_path):
    script = Script([Reply.calls(ScriptedToolCall("", {"command": "ls"})), Reply(text="Understood, no such tool.")])
    with serve(script) as server:  # strict: a call without a name would be answered 400
        result, log, _ = await run(server, tmp_path)
    assert result.answer == "Understood, no such tool."
    call = next(m for m in log.messages if m.tool_calls).tool_calls[0]
    assert call.name == ""  # the log keeps what the model sent
    answer = next(m for m in log.messages if m.role == "tool")
    assert answer.tool_call_id == call.id and "unknown tool ''" in answer.content
    sent = agent_requests(server)[1].messages
    (assistant,) = [m for m in sent if m.get("tool_calls")]
    assert assistant["tool_calls"][0]["function"]["name"] == "invalid_tool_call"
    assert any(m["role"] == "tool" and m["tool_call_id"] == call.id for m in sent)
    assert server.problems == []
