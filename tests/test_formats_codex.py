"""Codex CLI rollouts: the real coverage file (CLI 0.146 line types, six `compacted` lines) and
hand-written 0.5x lines (JSON-encoded tool output, a compaction with only a message)."""

import json

from breakwater.core.policy import preset
from breakwater.core.simulate import view_at
from breakwater.formats import load_session
from support.transcripts import REAL, calls_and_results

COVERAGE = REAL / "codex" / "agentsessions_codex_coverage_small.jsonl"


def test_response_items_are_the_history_and_event_msgs_are_not_imported_twice():
    log = load_session(COVERAGE)
    lines = [json.loads(raw) for raw in COVERAGE.read_text(encoding="utf-8").splitlines()]
    user_items = [o for o in lines if o["type"] == "response_item" and o["payload"]["type"] in
                  ("message", "agent_message") and o["payload"].get("role") != "assistant"]
    user_events = [o for o in lines if o["type"] == "event_msg" and o["payload"]["type"] == "user_message"]
    users = [m for m in log.messages if m.role == "user"]
    assert len(user_events) == 3 and len(users) == len(user_items) == 4
    assert log.messages[0].role == "system" and log.messages[0].meta["from"] == "base_instructions"
    first_user = users[0]
    assert first_user.content == "List the files\n[image]" and first_user.meta["images"] == 1
    assert log.header["id"] == "019fc8be-3658-7ca3-9e29-000000000000" and log.header["cli_version"] == "0.146.0"
    assert log.header["window"] == 258400


def test_calls_of_every_kind_keep_their_results_even_when_one_comes_late():
    log = load_session(COVERAGE)
    first = next(m for m in log.messages if m.role == "assistant" and m.tool_calls)
    assert [c.id for c in first.tool_calls] == ["call-1", "call-2"]
    i = log.messages.index(first)
    # call-1's output is 12 lines after call-2's in the file; both follow their calls here
    assert [(m.tool_call_id, m.content) for m in log.messages[i + 1:i + 3]] == [
        ("call-2", "a.txt\n"), ("call-1", "a.txt\nb.txt\n")]
    calls, results, answered = calls_and_results([log])
    assert calls == 6 and answered == 5 and results == 6   # one output's call was trimmed out of the file


def test_each_compacted_line_is_a_recorded_compaction_with_its_replacement_history():
    log = load_session(COVERAGE)
    comps = [e for e in log.events if e.type == "compaction"]
    assert len(comps) == 6 and {c.get("trigger") for c in comps} == {"recorded"}
    first = comps[0]
    assert first.get("window_number") == 2 and first.get("cut_id") is None
    assert first.get("replacement_history")[0]["role"] == "user"
    assert first.get("summary") == "\n\n".join(h["content"] for h in first.get("replacement_history"))
    usage = next(e for e in log.events if e.type == "usage")
    assert usage.get("prompt_tokens") == 16341 and usage.get("cached_tokens") == 3584


def test_old_rollout_json_encoded_output_is_unwrapped_and_a_message_only_compaction_replaces_all(tmp_path):
    def line(kind, payload):
        return json.dumps({"timestamp": "2025-09-01T10:00:00Z", "type": kind, "payload": payload}) + "\n"

    out = json.dumps({"output": "README.md\napp\n", "metadata": {"exit_code": 0, "duration_seconds": 0.1}})
    path = tmp_path / "rollout.jsonl"
    path.write_text(
        line("session_meta", {"id": "r1", "cwd": "/w", "cli_version": "0.58.0", "instructions": None})
        + line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                                  "text": "list it"}]})
        + line("event_msg", {"type": "user_message", "message": "list it"})
        + line("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "look"}],
                                 "encrypted_content": "gAAA"})
        + line("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                                 "arguments": "{\"command\":[\"ls\"]}"})
        + line("response_item", {"type": "function_call_output", "call_id": "c1", "output": out})
        + line("event_msg", {"type": "token_count", "info": {"last_token_usage": {"input_tokens": 900,
                                                                                  "output_tokens": 20}}})
        + line("compacted", {"message": "the user wants a listing; it was done"})
        + line("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text",
                                                                                  "text": "now count"}]})
        + line("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text",
                                                                                       "text": "2 files"}]}),
        encoding="utf-8")
    log = load_session(path)
    assert [m.role for m in log.messages] == ["user", "assistant", "tool", "user", "assistant"]
    call, result = log.messages[1], log.messages[2]
    assert call.meta["reasoning"] == "look" and call.meta["encrypted_reasoning"] == 1
    assert result.content == "README.md\napp\n" and result.meta["exit_code"] == 0
    assert [e.get("prompt_tokens") for e in log.events if e.type == "usage"] == [900]
    comp = next(e for e in log.events if e.type == "compaction")
    assert comp.get("summary") == "the user wants a listing; it was done" and "replacement_history" not in comp.data
    sent = view_at(log, preset("breakwater"), 2).to_api()
    assert "README.md" not in json.dumps(sent) and any("it was done" in m["content"] for m in sent)
    assert log.issues == []


def test_every_text_the_model_saw_is_in_the_import():
    log = load_session(COVERAGE)
    imported = [m.content for m in log.messages] + [e.get("summary") for e in log.events if e.type == "compaction"]
    imported += [m.meta.get("reasoning", "") for m in log.messages if m.meta]
    texts = []
    for raw in COVERAGE.read_text(encoding="utf-8").splitlines():
        obj = json.loads(raw)
        p = obj["payload"]
        if obj["type"] == "response_item" and p["type"] in ("message", "agent_message", "reasoning"):
            texts += [c["text"] for c in (p.get("content") or []) + p.get("summary", []) if c.get("text")]
        elif obj["type"] == "response_item" and p["type"].endswith("_output") and "output" in p:
            out = p["output"]
            texts += [out] if isinstance(out, str) else [c["text"] for c in
                                                          (out if isinstance(out, list) else [out]) if c.get("text")]
        elif obj["type"] == "compacted":
            texts += [p["message"]] if p["message"] else []
    assert len(texts) > 20
    assert [t for t in texts if not any(t in i for i in imported)] == []
