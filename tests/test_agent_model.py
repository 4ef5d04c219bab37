"""Smoke tests against a real model: SmolLM2-135M-Instruct behind llama-cpp-python's server.

Deselected by default; `make test-model` starts the server (scripts/model_server.sh), runs
these with `-m model`, and stops it. They check the wire, not the model's wits: a 135M model
answers poorly, and a rejected summary is a valid outcome (the fallback is what is tested
then). Each test prints what it saw, so the run doubles as a report.
"""

from __future__ import annotations

import json
import os
import time

import openai
import pytest
from agent_support import assert_log_valid, events, load

from breakwater.agent import AgentSession
from breakwater.agent.config import AgentConfig
from breakwater.agent.summarizer import LLMSummarizer
from breakwater.core.log.message import Message, ToolCall
from breakwater.core.policy import preset

pytestmark = pytest.mark.model

BASE_URL = os.environ.get("BREAKWATER_MODEL_URL", "http://127.0.0.1:8765/v1")
WINDOW = int(os.environ.get("BREAKWATER_MODEL_WINDOW", "4096"))


def report(capsys, text: str) -> None:
    with capsys.disabled():
        print(f"\n[model] {text}", flush=True)


@pytest.fixture(scope="module")
def model_id() -> str:
    try:
        models = openai.OpenAI(base_url=BASE_URL, api_key="no-key", max_retries=0, timeout=10).models.list()
    except openai.APIConnectionError:
        pytest.fail(f"no model server at {BASE_URL}; run `make test-model`")
    return models.data[0].id


async def test_a_streamed_chat_completion_with_usage(model_id, capsys):
    client = openai.AsyncOpenAI(base_url=BASE_URL, api_key="no-key", max_retries=0, timeout=120)
    started = time.monotonic()
    first_token = None
    pieces, usage, finish = [], None, None
    stream = await client.chat.completions.create(
        model=model_id, stream=True, stream_options={"include_usage": True}, max_tokens=64, temperature=0,
        messages=[{"role": "user", "content": "Name three colours of the rainbow."}])
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.content:
                first_token = first_token or time.monotonic()
                pieces.append(choice.delta.content)
            finish = choice.finish_reason or finish
    elapsed = time.monotonic() - started
    await client.close()
    text = "".join(pieces)
    assert text.strip() and len(pieces) > 1 and finish in ("stop", "length")
    tokens = usage.completion_tokens if usage else len(pieces)
    decode = elapsed - (first_token - started)
    report(capsys, f"stream: {len(pieces)} chunks, {tokens} tokens in {elapsed:.2f} s "
                   f"(first token {first_token - started:.2f} s, {tokens / max(decode, 1e-6):.0f} tokens/s decoding); "
                   f"usage chunk: {'yes' if usage else 'no'}; text: {text.strip()[:80]!r}")


class FirstCallForced(AgentSession):
    """The agent, with the first request forcing a bash call (a 135M model will not choose one)."""

    def request_params(self):
        params = super().request_params()
        if self.steps == 0:
            params["tool_choice"] = {"type": "function", "function": {"name": "bash"}}
        return params


async def test_the_agent_loop_runs_a_forced_tool_call_and_answers(model_id, tmp_path, capsys):
    config = AgentConfig(base_url=BASE_URL, model=None, workspace=tmp_path, window=WINDOW, auto_approve=True,
                         max_tokens=96, temperature=0.0, retry_base_s=0.5, max_steps=3, request_timeout_s=300)
    seen = []
    started = time.monotonic()
    async with FirstCallForced(config, on_event=seen.append) as agent:
        try:
            answer = await agent.send("List the files in the workspace with bash, then say what you found.")
        except Exception as exc:  # a 135M model may keep calling tools; the log is what is checked
            answer = f"(no answer: {exc})"
        policy = agent.policy
        assert agent.model == model_id
    elapsed = time.monotonic() - started
    log = load(agent.path)
    assert_log_valid(log, policy)
    calls = [c for m in log.messages if m.role == "assistant" for c in m.tool_calls]
    results = [m for m in log.messages if m.role == "tool"]
    usage = events(log, "usage")
    assert calls and calls[0].name == "bash" and results
    report(capsys, f"agent loop: {agent.steps} steps in {elapsed:.1f} s; first call {calls[0].name}"
                   f"({calls[0].arguments[:80]}) -> exit {results[0].meta['source'].get('exit_code')}; "
                   f"usage events: {len(usage)}; answer: {answer.strip()[:100]!r}")


def test_the_llm_summarizer_produces_or_is_rejected(model_id, capsys):
    history = [Message("m1", "user", "Fix the flaky timeout test in src/utils.go.", turn=1),
               Message("a1", "assistant", "I will read the file first.",
                       (ToolCall("c1", "read_file", json.dumps({"path": "src/utils.go"})),), turn=1),
               Message("t1", "tool", "func parseTimeout(s string) (time.Duration, error) {\n"
                                     "\treturn time.ParseDuration(s + \"s\")\n}", tool_call_id="c1", turn=2),
               Message("a2", "assistant", "The bug: a unit is appended twice. I changed it to ParseDuration(s).",
                       turn=2)]
    client = openai.OpenAI(base_url=BASE_URL, api_key="no-key", max_retries=0, timeout=300)
    summarizer = LLMSummarizer(client, model_id, window=WINDOW, max_tokens=512)
    started = time.monotonic()
    result = summarizer.summarize(history, None, preset("breakwater"))
    (outcome,) = summarizer.take_outcomes()
    assert result.ok and result.text
    assert outcome.calls == 1 or not outcome.ok
    verdict = "kept" if outcome.ok else f"rejected ({outcome.reason}); extractive fallback used"
    report(capsys, f"summarizer: {verdict}; {outcome.completion_tokens} completion tokens in "
                   f"{time.monotonic() - started:.1f} s")


async def test_the_workbench_chats_with_the_real_model(model_id, tmp_path, capsys):
    """One chat session in the workbench, driven by keys, against the real small model."""
    from textual.widgets import Input
    from ui_support import until

    from breakwater.ui.chat_app import ChatApp
    from breakwater.ui.config import UISettings

    config = AgentConfig(base_url=BASE_URL, model=model_id, workspace=tmp_path, window=WINDOW, auto_approve=True,
                         max_steps=4, max_tokens=96, request_timeout_s=120)
    app = ChatApp(config, settings=UISettings(), counter="heuristic")
    async with app.run_test(size=(160, 48)) as pilot:
        await until(pilot, lambda: hasattr(app.screen, "agent"), timeout=60)
        chat = app.screen.query_one("#chat-input", Input)
        chat.focus()
        chat.value = "Say hello in one short sentence."
        await pilot.press("enter")
        await until(pilot, lambda: app.screen._busy, timeout=10)
        await until(pilot, lambda: not app.screen._busy, timeout=300)
        path = app.agent.path
        await pilot.press("ctrl+q")
    log = load(path)
    assistants = [m for m in log.messages if m.role == "assistant"]
    report(capsys, f"workbench chat: {len(assistants)} assistant message(s), first: {assistants[0].content[:120]!r}")
    assert assistants and assistants[-1].content.strip() and not (assistants[-1].meta or {}).get("partial")
    assert_log_valid(log, preset("breakwater").with_changes(window=WINDOW))
