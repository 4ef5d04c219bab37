"""OpenAI chat arrays, litellm logs, SWE-agent and mini-swe-agent trajectories: real files, plus
hand-written ones for the text modes no real file shows."""

import json

import pytest

from breakwater.formats import detect_format, load_session
from support.transcripts import REAL, calls_and_results, imported_chars

LITELLM = REAL / "openai-chat" / "openhands-sdk_llm-log_claude-sonnet-4_1757015046.707.json"
MINI = REAL / "mini-swe-agent" / "pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json"
SWE = REAL / "swe-agent" / "marshmallow-1867__function_calling_replace_from_source.traj"


def test_litellm_log_response_is_the_last_reply_with_its_usage():
    log = load_session(LITELLM)
    record = json.loads(LITELLM.read_text(encoding="utf-8"))
    reply = record["response"]["choices"][0]["message"]
    last = log.messages[-1]
    assert last.role == "assistant" and last.content == reply["content"]
    assert [c.id for c in last.tool_calls] == [c["id"] for c in reply["tool_calls"]]
    usage = [e for e in log.events if e.type == "usage"]
    assert [e.get("prompt_tokens") for e in usage] == [record["response"]["usage"]["prompt_tokens"]]
    assert log.header["window"] == record["context_window"] == 200000


def test_litellm_non_function_calling_mode_imports_what_the_model_saw(tmp_path):
    path = tmp_path / "log.json"
    seen = [{"role": "system", "content": "You are an agent."},
            {"role": "user", "content": "make hello.py"},
            {"role": "assistant", "content": "<function=bash>\n<parameter=command>ls</parameter>\n</function>"},
            {"role": "user", "content": "EXECUTION RESULT of [bash]:\nREADME.md"}]
    raw = [*seen[:2], {"role": "assistant", "content": "", "tool_calls": [
        {"id": "t1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
           {"role": "tool", "tool_call_id": "t1", "content": "README.md"}]
    path.write_text(json.dumps({"messages": seen, "raw_messages": raw, "response": {
        "choices": [{"message": {"role": "assistant", "content": "Done."}}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 3}}}), encoding="utf-8")
    log = load_session(path)
    assert [m.content for m in log.messages] == [m["content"] for m in seen] + ["Done."]
    assert not any(m.tool_calls for m in log.messages)


def test_mini_swe_agent_tool_calling_trajectory():
    assert detect_format(MINI) == "mini-swe-agent"
    log = load_session(MINI)
    data = json.loads(MINI.read_text(encoding="utf-8"))
    calls, results, answered = calls_and_results([log])
    assert (calls, results, answered) == (64, 63, 63)   # the last call submits; the run ends there
    assert log.turn_count() == data["info"]["model_stats"]["api_calls"] == 64
    exit_note = next(e for e in log.events if e.type == "note")
    assert exit_note.get("kind") == "role:exit" and exit_note.get("text").startswith("diff --git")
    usage = [e for e in log.events if e.type == "usage"]
    first = data["messages"][2]["extra"]["response"]["usage"]
    assert len(usage) == 64 and usage[0].get("prompt_tokens") == first["prompt_tokens"]
    assert log.id == "astropy__astropy-12907" and log.header["exit_status"] == "Submitted"


def test_mini_swe_agent_v1_text_format(tmp_path):
    path = tmp_path / "x.traj.json"
    msgs = [{"role": "system", "content": "You run bash."}, {"role": "user", "content": "fix it"},
            {"role": "assistant", "content": "THOUGHT: look\n```bash\nls\n```"},
            {"role": "user", "content": "<returncode>0</returncode>\n<output>\na.py\n</output>"}]
    path.write_text(json.dumps({"info": {"mini_version": "1.3.0", "exit_status": "Submitted"}, "messages": msgs}))
    assert detect_format(path) == "mini-swe-agent"
    log = load_session(path)
    assert [(m.role, m.content) for m in log.messages] == [(m["role"], m["content"]) for m in msgs]


def test_swe_agent_function_calling_trajectory():
    log = load_session(SWE)
    data = json.loads(SWE.read_text(encoding="utf-8"))
    calls, results, answered = calls_and_results([log])
    assert (calls, results, answered) == (13, 13, 13)
    assert len(log.messages) == len(data["history"]) == 28
    assert log.messages[3].meta["message_type"] == "observation"
    assert sum(len(m.content) for m in log.messages) == sum(len(h["content"]) for h in data["history"])


def test_swe_agent_text_action_trajectory(tmp_path):
    path = tmp_path / "t.traj"
    history = [{"role": "system", "content": "SETTING: ...", "agent": "main"},
               {"role": "user", "content": "demo", "is_demo": True, "agent": "main"},
               {"role": "user", "content": "ISSUE: fix", "agent": "main"},
               {"role": "assistant", "content": "Look.\n```\nls -F\n```", "thought": "Look.", "action": "ls -F",
                "agent": "main"},
               {"role": "user", "content": "setup.py src/", "agent": "main"}]
    path.write_text(json.dumps({"environment": "swe_main", "trajectory": [], "history": history, "info": {}}),
                    encoding="utf-8")
    assert detect_format(path) == "swe-agent"
    log = load_session(path)
    assert [m.content for m in log.messages] == [h["content"] for h in history]
    assert log.messages[1].meta["is_demo"] is True and log.turn_count() == 1


def chat_chars(messages):
    """Characters of chat-completions messages as a model sees them (content, call names and
    arguments, reasoning), counted straight from the JSON."""
    total = 0
    for m in messages:
        c = m.get("content")
        if isinstance(c, str):
            total += len(c)
        elif isinstance(c, list):
            texts = [p["text"] for p in c if isinstance(p, dict) and isinstance(p.get("text"), str)]
            total += sum(map(len, texts)) + max(0, len(texts) - 1)   # parts are joined by a newline
        for call in m.get("tool_calls") or ():
            total += len(call["function"]["name"]) + len(call["function"]["arguments"])
        if isinstance(m.get("reasoning_content"), str):
            total += len(m["reasoning_content"])
    return total


@pytest.mark.parametrize("name", ["openai-chat/openhands-sdk_fncall-llm-message.json",
                                  "openai-chat/openhands-sdk_llm-log_claude-sonnet-4_1757015046.707.json",
                                  "mini-swe-agent/pr854_deepseek-v4-flash__astropy__astropy-12907.traj.json"])
def test_chat_files_keep_every_character(name):
    path = REAL / name
    data = json.loads(path.read_text(encoding="utf-8"))
    messages = data if isinstance(data, list) else list(data["messages"])
    if isinstance(data, dict) and isinstance(data.get("response"), dict):
        messages.append(data["response"]["choices"][0]["message"])
    assert imported_chars([load_session(path)]) == chat_chars(messages)
