"""`breakwater proxy` against the scripted provider, driven by the real `openai` client and plain HTTP:
errors pass through unchanged, a dead upstream is answered in the wire's shape, sizes are bounded, a
request that extends an earlier one is the same session, the workbench's overlay (pins, triggers)
shapes the session's next request, and each wire's view goes back as the agent sent what it did not
change."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

import openai
import pytest
from support.proxy_run import kept_bytes, request_notes, running_proxy, session_records
from support.scripted_provider import CONTEXT_LENGTH_ANTHROPIC, CONTEXT_LENGTH_OPENAI, ScriptedProvider, Step

from breakwater.core.log.message import Message
from breakwater.core.overlay import OverlayFile, overlay_path
from breakwater.formats.follow import Follower
from breakwater.formats.sessions import find_sessions
from breakwater.proxy import anthropic, chat, responses
from breakwater.proxy.wire import fingerprint

KEY = "sk-test-proxy-unit-0123456789abcdef"
TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def _post(url: str, body: dict, headers: dict | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_context_length_error_passes_through_unchanged_to_the_openai_client(tmp_path):
    steps = [Step(None, text="never", fail=CONTEXT_LENGTH_OPENAI)]
    with ScriptedProvider(steps) as provider, running_proxy(provider.url, tmp_path, "--observe") as (url, sessions):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
        status, body = _post(f"{url}/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                            "tools": TOOLS})
        # the second time the provider answers: what it said reaches the agent as it said it
        assert status == 200
    assert err.value.status_code == 400 and err.value.code == "context_length_exceeded"
    assert err.value.body == CONTEXT_LENGTH_OPENAI[1]["error"]
    log = next(sessions.glob("*.jsonl"))
    errors = [r for r in session_records(log) if r["type"] == "error"]
    assert errors[0]["status"] == 400 and "context_length_exceeded" in errors[0]["message"]


def test_streams_pass_through_chunk_by_chunk_and_the_usage_is_logged(tmp_path):
    steps = [Step("bash", {"command": "ls"}), Step(None, text="All done.")]
    with ScriptedProvider(steps) as provider, running_proxy(provider.url, tmp_path, "--observe") as (url, sessions):
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
        history = [{"role": "user", "content": "list the files"}]
        chunks = list(client.chat.completions.create(model="m", messages=history, tools=TOOLS, stream=True,
                                                     stream_options={"include_usage": True}))
        call = chunks[2].choices[0].delta.tool_calls[0]
        history += [{"role": "assistant", "content": "Working on it.", "tool_calls": [
            {"id": call.id, "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
                    {"role": "tool", "tool_call_id": call.id, "content": "a.txt"}]
        final = client.chat.completions.create(model="m", messages=history, tools=TOOLS)
    assert len(chunks) >= 6 and chunks[-1].usage.prompt_tokens > 0
    assert final.choices[0].message.content == "All done."
    logs = list(sessions.glob("*.jsonl"))
    assert len(logs) == 1          # the second request extends the first: one session
    records = session_records(logs[0])
    assert [r["role"] for r in records if r["type"] == "message"] == ["user", "assistant", "tool", "assistant"]
    usage = [r for r in records if r["type"] == "usage"]
    assert usage[0]["provider_usage"] == provider.usages[0] and usage[0]["prompt_tokens"] == chunks[-1].usage.prompt_tokens


def _leave_after(url: str, body: dict, marker: bytes) -> bytes:
    """POST a streamed request and close the connection (a reset, as a process that exits does) as soon as
    `marker` has arrived: what the agent read."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: %d\r\n\r\n" % len(data) + data)
        got = b""
        while marker not in got:
            chunk = s.recv(65536)
            assert chunk, got
            got += chunk
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return got


RESPONSES = {"model": "gpt-5-codex", "stream": True, "tools": [{"type": "function", "name": "shell", "parameters": {}}],
             "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}


def _records_of_leaving(tmp_path, step: Step, marker: bytes, wait: float) -> tuple[list[dict], ScriptedProvider]:
    """The session's records after an agent that left once `marker` arrived, and the provider."""
    with ScriptedProvider([step]) as provider, running_proxy(provider.url, tmp_path, "--observe") as (url, sessions):
        _leave_after(url, RESPONSES, marker)
        time.sleep(wait)
    return session_records(next(sessions.glob("*.jsonl"))), provider


def test_an_agent_that_leaves_after_the_last_event_has_its_reply_and_usage_recorded(tmp_path):
    # Codex closes as soon as it has `response.completed`; the provider ends its stream a moment later
    records, provider = _records_of_leaving(tmp_path, Step(None, text="done", tail=1.0), b"response.completed", 1.5)
    assert not [r for r in records if r["type"] == "error"]
    assert [r["content"] for r in records if r["type"] == "message" and r["role"] == "assistant"] == ["done"]
    assert [r["provider_usage"] for r in records if r["type"] == "usage"] == [provider.usages[0]]


def test_an_agent_that_leaves_mid_reply_is_recorded_as_cut_by_the_agent(tmp_path):
    # the agent is stopped while the model writes: the proxy stops reading (the provider stops generating)
    records, provider = _records_of_leaving(tmp_path, Step(None, text="never read", gap=0.4), b"response.created", 2.5)
    assert [r["message"] for r in records if r["type"] == "error"] == ["the agent closed the connection before the reply's end"]
    assert not [r for r in records if r["type"] in ("usage",) or r.get("role") == "assistant"]
    assert provider.played == 1


def test_browse_lists_a_proxied_session_and_follow_reads_it(tmp_path, monkeypatch):
    """Recorded where `browse` looks (no --sessions): listed, and read by the follower `replay --follow` uses."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    steps = [Step(None, text="hello")]
    with ScriptedProvider(steps) as provider:
        proc = subprocess.Popen([sys.executable, "-m", "breakwater", "proxy", "--port", "0", "--observe", "--upstream",
                                 provider.url], stderr=subprocess.PIPE, text=True)
        try:
            port = proc.stderr.readline().split("127.0.0.1:")[1].split(" ")[0]
            status, _ = _post(f"http://127.0.0.1:{port}/v1/chat/completions",
                              {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS})
        finally:
            proc.terminate()
            proc.wait(10)
    assert status == 200
    found = [s for s in find_sessions(home=tmp_path / "home", workspace=tmp_path) if s.agent == "Breakwater proxy"]
    assert len(found) == 1 and found[0].model == "gpt-4o" and found[0].last_tokens == provider.usages[0]["prompt_tokens"]
    log = Follower(found[0].path).read()
    assert [m.role for m in log.messages] == ["user", "assistant"] and log.messages[-1].content == "hello"


def test_a_history_the_agent_rewrote_is_a_session_that_names_the_one_it_continues(tmp_path):
    body = {"model": "claude-x", "max_tokens": 9, "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
            "metadata": {"user_id": json.dumps({"session_id": "agent-session-1"})}}
    steps = [Step(None, text="one"), Step(None, text="two"), Step(None, text="three")]
    with ScriptedProvider(steps) as provider, running_proxy(provider.url, tmp_path, "--observe") as (url, sessions):
        first = [{"role": "user", "content": "hi"}]
        _post(f"{url}/v1/messages", {**body, "messages": first})
        _post(f"{url}/v1/messages", {**body, "messages": first + [
            {"role": "assistant", "content": "one"}, {"role": "user", "content": "more"}]})
        _post(f"{url}/v1/messages", {**body, "messages": [{"role": "user", "content": "summary of it all; go on"}]})
    heads = sorted((session_records(p)[0] for p in sessions.glob("*.jsonl")), key=lambda h: "continues" in h)
    assert len(heads) == 2 and heads[1]["continues"] == heads[0]["id"]
    assert all(h["agent_session"] == "agent-session-1" for h in heads)
    assert provider.played == 3


def test_a_recording_that_fails_never_fails_the_request(tmp_path):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the sessions would go")
    with ScriptedProvider([Step(None, text="still answered")]) as provider:
        proc = subprocess.Popen([sys.executable, "-m", "breakwater", "proxy", "--port", "0", "--upstream", provider.url,
                                 "--sessions", str(blocked)], stderr=subprocess.PIPE, text=True)
        try:
            port = proc.stderr.readline().split("127.0.0.1:")[1].split(" ")[0]
            status, body = _post(f"http://127.0.0.1:{port}/v1/chat/completions",
                                 {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS})
            said = proc.stderr.readline()
        finally:
            proc.terminate()
            proc.wait(10)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "still answered"
    assert "recording a request failed; it went through as the agent sent it" in said
    assert provider.received[0].body == json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                    "tools": TOOLS}).encode()


def test_a_dead_upstream_is_a_502_in_the_wire_s_shape(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with running_proxy(dead, tmp_path, "--observe") as (url, sessions):
        status, body = _post(f"{url}/v1/messages", {"model": "claude-x", "max_tokens": 5,
                                                    "messages": [{"role": "user", "content": "hi"}]},
                             {"x-api-key": KEY})
    assert status == 502
    error = json.loads(body)
    assert error["type"] == "error" and "did not answer" in error["error"]["message"]
    assert KEY not in body.decode()


def test_a_request_over_the_size_bound_is_refused(tmp_path):
    with ScriptedProvider([Step(None)]) as provider, \
            running_proxy(provider.url, tmp_path, "--observe", "--max-request-mb", "1") as (url, _):
        status, body = _post(f"{url}/v1/chat/completions", {"model": "m", "messages": [
            {"role": "user", "content": "x" * (2 << 20)}]})
    assert status == 413 and "limit" in json.loads(body)["error"]["message"]
    assert provider.received == []


def test_another_host_is_bound_with_a_warning(tmp_path):
    out = subprocess.run([sys.executable, "-m", "breakwater", "proxy", "--upstream", "ftp://x"], capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 2 and "not an http(s) URL" in out.stderr and "Traceback" not in out.stderr
    with ScriptedProvider([Step(None)]) as provider:
        proc = subprocess.Popen([sys.executable, "-m", "breakwater", "proxy", "--port", "0", "--host", "0.0.0.0",
                                 "--upstream", provider.url, "--sessions", str(tmp_path)], stderr=subprocess.PIPE, text=True)
        try:
            first = proc.stderr.readline()
        finally:
            proc.terminate()
            proc.wait(10)
    assert "warning: listening on 0.0.0.0" in first


def test_a_pin_and_a_trigger_made_in_the_workbench_shape_the_next_request(tmp_path):
    """The overlay the workbench writes beside the proxied session (core/overlay.py) is read before the
    session's next request: a trigger masks old tool output from there on, a pinned message is left whole."""
    big = "\n".join(f"line {i} of a long listing" for i in range(400))
    steps = [Step("bash", {"command": "ls"})] * 3 + [Step(None, text="done")]
    with ScriptedProvider(steps) as provider, running_proxy(provider.url, tmp_path) as (url, sessions):
        history = [{"role": "user", "content": "look around"}]

        def turn(k: int) -> None:
            status, body = _post(f"{url}/v1/chat/completions", {"model": "m", "messages": history, "tools": TOOLS})
            assert status == 200
            msg = json.loads(body)["choices"][0]["message"]
            history.append(msg)
            if msg.get("tool_calls"):
                history.append({"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": f"{k}\n{big}"})

        turn(0)
        turn(1)
        log = next(sessions.glob("*.jsonl"))
        assert provider.received[-1].body == kept_bytes(log, request_notes(log)[-1]["received"])  # nothing to compact yet
        tools = [r for r in session_records(log) if r["type"] == "message" and r["role"] == "tool"]
        overlay = OverlayFile(overlay_path(log))
        overlay.add("trigger", at=len(session_records(log)) - 1, stage="mask")
        overlay.add("pin", at=len(session_records(log)) - 1, message_id=tools[0]["id"])
        turn(2)
        turn(3)
    sent = json.loads(provider.received[-1].body)["messages"]
    outputs = [m["content"] for m in sent if m["role"] == "tool"]
    assert outputs[0].startswith("0\n") and len(outputs[0]) > 10_000     # pinned: whole
    assert "early tool output cleared" in outputs[1] or len(outputs[1]) < 2_000   # masked from the trigger on
    note = request_notes(log)[-1]
    assert note["edits"] and kept_bytes(log, note["sent"]) == provider.received[-1].body


# -- the wires' conversions ----------------------------------------------------------------------------------------
def _ids(conv):
    for k, it in enumerate(conv.items):
        it.message = Message(f"m{k}", it.message.role, it.message.content, it.message.tool_calls, it.message.tool_call_id)
    return [it.message for it in conv.items]


ANTHROPIC_BODY = {"model": "claude-x", "system": [{"type": "text", "text": "be brief"}], "messages": [
    {"role": "user", "content": [{"type": "text", "text": "<reminder>"}, {"type": "text", "text": "go"}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                                      {"type": "text", "text": "running"},
                                      {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a\nb" * 2000,
                                  "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "and then?"}]}]}

CHAT_BODY = {"model": "m", "messages": [
    {"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "go"}]},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                          "function": {"name": "bash", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "out" * 3000}]}

RESPONSES_BODY = {"model": "m", "instructions": "be brief", "input": [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
    {"type": "reasoning", "summary": [], "encrypted_content": "xyz"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "running"}]},
    {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{\"cmd\": \"ls\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "out" * 3000}]}


@pytest.mark.parametrize("wire, body, key", [(anthropic, ANTHROPIC_BODY, "messages"), (chat, CHAT_BODY, "messages"),
                                             (responses, RESPONSES_BODY, "input")])
def test_a_view_that_changes_nothing_gives_back_the_request(wire, body, key):
    conv = wire.read_request(body)
    view = _ids(conv)
    assert json.loads(json.dumps(wire.rebuild(body, conv.items, view))) == body
    assert [m.role for m in view].count("tool") == 1 and conv.system.startswith("be brief")


@pytest.mark.parametrize("wire, body, key", [(anthropic, ANTHROPIC_BODY, "messages"), (chat, CHAT_BODY, "messages"),
                                             (responses, RESPONSES_BODY, "input")])
def test_an_edited_tool_result_keeps_its_call_and_the_rest_as_sent(wire, body, key):
    conv = wire.read_request(body)
    view = [m.with_content("[cleared]") if m.role == "tool" else m for m in _ids(conv)]
    out = wire.rebuild(body, conv.items, view)
    again = wire.read_request(out)
    assert [m.content for m in _ids(again)] == [m.content for m in view]
    assert [fingerprint(m) for m in _ids(again) if m.role != "tool"] == [fingerprint(m) for m in view if m.role != "tool"]
    assert {k: v for k, v in out.items() if k != key} == {k: v for k, v in body.items() if k != key}
    if wire is anthropic:   # the thinking block and its signature go back untouched
        assert out["messages"][1]["content"][0] == ANTHROPIC_BODY["messages"][1]["content"][0]
    if wire is responses:
        assert {"type": "reasoning", "summary": [], "encrypted_content": "xyz"} in out["input"]


@pytest.mark.parametrize("wire, body, key", [(anthropic, ANTHROPIC_BODY, "messages"), (chat, CHAT_BODY, "messages"),
                                             (responses, RESPONSES_BODY, "input")])
def test_a_call_whose_arguments_the_view_changed_goes_out_with_them(wire, body, key):
    """A policy clearing far tool inputs (mask_clear_tool_inputs) sends the call with the arguments its
    view counted; its id, name and the rest of the message go as the agent sent them."""
    from breakwater.core.log.message import ToolCall

    conv = wire.read_request(body)
    new = '{"cleared":true}'
    view = [m.with_calls(tuple(ToolCall(c.id, c.name, new) for c in m.tool_calls)) if m.tool_calls else m
            for m in _ids(conv)]
    out = wire.rebuild(body, conv.items, view)
    again = [m for m in _ids(wire.read_request(out)) if m.tool_calls]
    assert again and all(json.loads(c.arguments) == {"cleared": True} for m in again for c in m.tool_calls)
    assert [(c.id, c.name) for m in again for c in m.tool_calls] == \
        [(c.id, c.name) for m in view for c in m.tool_calls]
    assert [m.content for m in _ids(wire.read_request(out))] == [m.content for m in view]
    assert {k: v for k, v in out.items() if k != key} == {k: v for k, v in body.items() if k != key}


def test_a_summary_replaces_what_it_covers_and_the_wire_still_alternates():
    conv = anthropic.read_request(ANTHROPIC_BODY)
    view = _ids(conv)
    summary = Message("s1", "user", "[Summary of prior conversation]\nwe listed files")
    out = anthropic.rebuild(ANTHROPIC_BODY, conv.items, [summary, view[-1]])
    assert [m["role"] for m in out["messages"]] == ["user"]
    assert out["messages"][0]["content"][0]["text"].startswith("[Summary")


def test_deep_compaction_summarized_by_the_configured_summary_model(tmp_path, monkeypatch):
    """--summary-model: the summary comes from the model at Breakwater's own endpoint (not the upstream,
    not with the agent's key), the compaction is logged with it, and the request upstream carries it."""
    from agent_support import VALID_SUMMARY

    big = "\n".join(f"row {i}: value {i * 7}" for i in range(300))
    steps = [Step("bash", {"command": "cat data.csv"})] * 8 + [Step(None, text="done")]
    policy = tmp_path / "tiny.toml"
    policy.write_text('preset = "breakwater"\nwindow = 6000\nsnip = false\nmask = false\nmicrocompact = false\n')
    with ScriptedProvider([Step(None)], side_text=VALID_SUMMARY) as summaries, ScriptedProvider(steps) as provider:
        monkeypatch.setenv("OPENAI_BASE_URL", f"{summaries.url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-summary-0123456789")
        with running_proxy(provider.url, tmp_path, "--policy", str(policy), "--summary-model", "small-model") as (url, sessions):
            history = [{"role": "user", "content": "sum the data"}]
            for k in range(8):
                status, body = _post(f"{url}/v1/chat/completions", {"model": "m", "messages": history, "tools": TOOLS},
                                     {"authorization": f"Bearer {KEY}"})
                assert status == 200
                msg = json.loads(body)["choices"][0]["message"]
                history += [msg, {"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": f"{k}\n{big}"}]
    log = next(sessions.glob("*.jsonl"))
    compactions = [r for r in session_records(log) if r["type"] == "compaction"]
    assert compactions and compactions[0]["summarizer"] == "llm:small-model" and "Finish the scripted task" in compactions[0]["summary"]
    assert summaries.received and all(KEY not in r.headers.get("Authorization", "") for r in summaries.received)
    assert any("Finish the scripted task" in r.body.decode() for r in provider.main_requests())


def test_an_upstream_error_quoting_the_key_encoded_is_logged_without_it(tmp_path):
    import base64

    encoded = base64.b64encode(KEY.encode()).decode()
    steps = [Step(None, text="after", fail=(401, {"error": {"message": f"key {KEY} ({encoded}, {KEY.encode().hex()}) "
                                                                      "is not valid"}}))]
    with ScriptedProvider(steps) as provider, running_proxy(provider.url, tmp_path, "--observe") as (url, sessions):
        status, _ = _post(f"{url}/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
                                                         "tools": TOOLS},
                          {"authorization": f"Bearer {KEY}"})
    assert status == 401   # the agent gets the provider's answer as it was
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())
    assert "is not valid" in written
    for form in (KEY, encoded, KEY.encode().hex()):
        assert form not in written
