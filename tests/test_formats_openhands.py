"""OpenHands: the real V0 GUI download and V1 SDK event file, an eval output.jsonl made of real
V0 events, and condensations (no real file has one: the collected runs used the no-op condenser)."""

import json

from breakwater.core.policy import preset
from breakwater.core.simulate import view_at
from breakwater.formats import detect_format, load_session, load_sessions
from support.transcripts import REAL, calls_and_results, imported_chars

V0 = REAL / "openhands" / "runtime_trajs_basic_gui_mode.json"
V1 = REAL / "openhands" / "openhands-sdk-v1_goal_events.jsonl"


def test_v0_actions_become_the_model_responses_they_came_from():
    log = load_session(V0)
    events = json.loads(V0.read_text(encoding="utf-8"))
    assert [m.role for m in log.messages] == ["user"] + ["assistant", "tool"] * 4 + ["assistant"]
    calls, results, answered = calls_and_results([log])
    assert calls == results == answered == 4
    first = log.messages[1]
    response = events[7]["tool_call_metadata"]["model_response"]["choices"][0]["message"]
    assert first.tool_calls[0].arguments == response["tool_calls"][0]["function"]["arguments"]
    assert first.tool_calls[0].id == events[7]["tool_call_metadata"]["tool_call_id"]
    assert log.messages[2].meta["exit_code"] == 0
    assert sum(1 for e in log.events if e.type == "usage") == 4


def test_v1_actions_and_observations_are_paired_by_tool_call_id():
    log = load_session(V1)
    calls, results, answered = calls_and_results([log])
    assert (calls, answered) == (2, 2) and results == 3
    assert [i.line for i in log.issues] == [7]   # its action is not in this cut-down file
    assert log.messages[0].meta["reasoning"].startswith("Let me analyze the task")


def test_eval_output_jsonl_holds_one_session_per_instance(tmp_path):
    events = json.loads(V0.read_text(encoding="utf-8"))
    path = tmp_path / "output.jsonl"
    path.write_text("".join(json.dumps({"instance_id": f"repo__{i}", "instruction": "build it", "history": events,
                                        "metadata": {"agent_class": "CodeActAgent",
                                                     "llm_config": {"model": "claude-3-5-sonnet"}}}) + "\n"
                            for i in (1, 2)), encoding="utf-8")
    assert detect_format(path) == "openhands"
    logs = load_sessions(path)
    assert [log.id for log in logs] == ["repo__1", "repo__2"]
    assert logs[0].header["model"] == "claude-3-5-sonnet" and logs[1].turn_count() == 5


def test_v0_condensation_replaces_the_forgotten_events(tmp_path):
    events = json.loads(V0.read_text(encoding="utf-8"))
    events.insert(11, {"id": 99, "source": "agent", "action": "condensation", "message": "",
                       "args": {"forgotten_events_start_id": 7, "forgotten_events_end_id": 8,
                                "summary": "made the app directory", "summary_offset": 1}})
    path = tmp_path / "gui.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    log = load_session(path)
    comp = next(e for e in log.events if e.type == "compaction")
    kept = next(m for m in log.messages if m.id == comp.get("cut_id"))
    assert kept.tool_calls[0].id == events[9]["tool_call_metadata"]["tool_call_id"]   # first event kept
    assert comp.get("forgotten") == 2 and comp.get("trigger") == "recorded"
    sent = json.dumps(view_at(log, preset("breakwater"), 3).to_api())
    assert "made the app directory" in sent and "mkdir -p" not in sent and "index.html" in sent


def test_v1_condensation(tmp_path):
    path = tmp_path / "events.jsonl"
    rows = [
        {"id": "u", "kind": "MessageEvent", "source": "user", "llm_message": {"role": "user", "content": [
            {"type": "text", "text": "review the PR"}]}},
        {"id": "a1", "kind": "ActionEvent", "source": "agent", "llm_response_id": "r1", "thought": [],
         "tool_call": {"id": "c1", "name": "terminal", "arguments": "{\"command\": \"ls\"}"}, "tool_call_id": "c1"},
        {"id": "o1", "kind": "ObservationEvent", "source": "environment", "tool_call_id": "c1",
         "observation": {"content": [{"type": "text", "text": "big listing"}]}},
        {"id": "k", "kind": "Condensation", "source": "environment", "forgotten_event_ids": ["a1", "o1"],
         "summary": "listed the files", "summary_offset": 1},
        {"id": "a2", "kind": "ActionEvent", "source": "agent", "llm_response_id": "r2", "thought": [
            {"type": "text", "text": "next"}], "tool_call": {"id": "c2", "name": "finish", "arguments": "{}"}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert detect_format(path) == "openhands"
    log = load_session(path)
    comp = next(e for e in log.events if e.type == "compaction")
    assert comp.get("summary") == "listed the files" and comp.get("cut_id") is None
    sent = json.dumps(view_at(log, preset("breakwater"), 2).to_api())
    assert "listed the files" in sent and "big listing" not in sent


def test_v0_text_action_events_without_tool_call_metadata_are_paired_by_cause(tmp_path):
    events = [{"id": 0, "source": "user", "action": "message", "args": {"content": "list files"}},
              {"id": 1, "source": "agent", "action": "run", "message": "Running command: ls",
               "args": {"command": "ls", "thought": "Let me look."}},
              {"id": 2, "source": "agent", "cause": 1, "observation": "run", "content": "a.py",
               "extras": {"metadata": {"exit_code": 0}}},
              {"id": 3, "source": "agent", "action": "finish", "args": {"thought": "Done."}}]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(events), encoding="utf-8")
    log = load_session(path)
    assert [m.role for m in log.messages] == ["user", "assistant", "tool", "assistant"]
    call = log.messages[1].tool_calls[0]
    assert log.messages[1].content == "Let me look." and call.name == "run" and json.loads(call.arguments) == {
        "command": "ls"}
    assert log.messages[2].tool_call_id == call.id and log.messages[2].content == "a.py"


def test_v0_keeps_every_character_of_the_model_responses_and_observations():
    events = json.loads(V0.read_text(encoding="utf-8"))
    source, responses = 0, set()
    for ev in events:
        tcm = ev.get("tool_call_metadata")
        if ev.get("action") == "message":
            source += len(ev["args"]["content"])
        elif tcm and "action" in ev and tcm["model_response"]["id"] not in responses:
            responses.add(tcm["model_response"]["id"])
            msg = tcm["model_response"]["choices"][0]["message"]
            source += len(msg["content"] or "") + sum(len(c["function"]["name"]) + len(c["function"]["arguments"])
                                                      for c in msg["tool_calls"])
        elif tcm and "observation" in ev:
            source += len(ev["content"])
    assert imported_chars([load_session(V0)]) == source


def test_v1_keeps_every_character_of_thoughts_calls_and_observations():
    source = 0
    for raw in V1.read_text(encoding="utf-8").splitlines():
        ev = json.loads(raw)
        if ev["kind"] == "ActionEvent":
            source += sum(len(t["text"]) for t in ev["thought"]) + len(ev["reasoning_content"])
            source += len(ev["tool_call"]["name"]) + len(ev["tool_call"]["arguments"])
        elif ev["kind"] == "ObservationEvent":
            source += sum(len(t["text"]) for t in ev["observation"]["content"])
    assert imported_chars([load_session(V1)]) == source
