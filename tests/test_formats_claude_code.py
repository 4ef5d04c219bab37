"""Claude Code transcripts: real files of CLI 2.0.55 (main session), 2.0.76 (a subagent file) and a
coverage file with every line type of 2.1.x, plus small hand-written files for the cases none shows."""

import json
import subprocess
import sys

import pytest

from breakwater.core.simulate import simulate
from breakwater.core.policy import preset
from breakwater.formats import detect_format, load_session, load_sessions
from breakwater.cli.formats import write_native
from breakwater.core.log.session_log import load_native
from support.transcripts import REAL, calls_and_results, every_view_problems, imported_chars

CC = REAL / "claude-code"
MAIN = CC / "ccl_v2.0.55_a7da6a22.jsonl"
SUBAGENT = CC / "agenticprimer_v2.0.76_subagent_a0294d5.jsonl"
COVERAGE = CC / "agentsessions_claude_coverage_small.jsonl"


def source_counts(path):
    """Independently of the importer: characters the model saw, tool_use and tool_result blocks."""
    chars = uses = results = 0
    for raw in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(raw)
        if obj.get("type") not in ("user", "assistant") or obj.get("isVisibleInTranscriptOnly") and \
                not obj.get("isCompactSummary"):
            continue
        msg = obj["message"]
        content = msg["content"]
        if isinstance(content, str):
            chars += len(content)
            continue
        for b in content:
            kind = b.get("type")
            if kind == "text":
                chars += len(b["text"])
            elif kind == "thinking":
                chars += len(b["thinking"])
            elif kind == "tool_use":
                uses += 1
                chars += len(b["name"]) + len(json.dumps(b["input"], ensure_ascii=False))
            elif kind == "tool_result":
                results += 1
                c = b.get("content")
                chars += len(c) if isinstance(c, str) else sum(len(x.get("text", "")) for x in c or ())
    return chars, uses, results


@pytest.mark.parametrize("path", [MAIN, SUBAGENT], ids=lambda p: p.name)
def test_real_sessions_keep_every_character_call_and_result(path):
    logs = load_sessions(path)
    chars, uses, results = source_counts(path)
    calls, got_results, answered = calls_and_results(logs)
    assert (calls, got_results, answered) == (uses, results, uses)
    # the importer joins blocks of one turn with a blank line: the only characters it adds
    joins = sum(m.content.count("\n\n") for log in logs for m in log.messages)
    assert chars <= imported_chars(logs) <= chars + 2 * joins
    assert all(log.issues == [] for log in logs)


def test_content_block_lines_are_regrouped_into_api_turns_by_message_id():
    log = load_session(MAIN)
    lines = [json.loads(raw) for raw in MAIN.read_text(encoding="utf-8").splitlines()]
    ids = {o["message"]["id"] for o in lines if o.get("type") == "assistant"}
    assert log.turn_count() == len(ids) == 103
    first = log.messages[next(i for i, m in enumerate(log.messages) if m.role == "assistant")]
    assert len(first.tool_calls) == 3 and first.content.startswith("I'll")  # 4 lines, one response
    roles = [m.role for m in log.messages]
    assert roles.count("user") == 14 and roles.count("tool") == 108
    assert log.header["cli_version"] == "2.0.55" and log.header["model"].startswith("claude-opus-4-5")
    assert log.header["imported"]["skipped"] == {"summary": 2, "file-history-snapshot": 15}


def test_usage_of_each_turn_becomes_one_usage_event_with_the_api_prompt_count():
    log = load_session(MAIN)
    usage = [e for e in log.events if e.type == "usage"]
    assert len(usage) == log.turn_count()
    line = json.loads(MAIN.read_text(encoding="utf-8").splitlines()[12])
    u = line["message"]["usage"]
    assert usage[0].get("prompt_tokens") == u["input_tokens"] + u["cache_creation_input_tokens"] + \
        u["cache_read_input_tokens"]
    sim = simulate(log, preset("breakwater"), counter="heuristic")
    assert sim.turns[-1].api_tokens == usage[-2].get("prompt_tokens")  # what the previous reply reported
    assert sim.calibration.samples == len(usage)   # each paired with the count of its request (core/fold/own_request.py)


@pytest.mark.parametrize("path", sorted(CC.iterdir()), ids=lambda p: p.name)
def test_every_request_built_from_an_import_is_valid(path):
    assert detect_format(path) == "claude-code"
    for log in load_sessions(path):
        assert every_view_problems(log) == []


def test_subagent_file_is_its_own_session():
    logs = load_sessions(SUBAGENT)
    assert [log.id for log in logs] == ["agent-a0294d5"]
    assert logs[0].turn_count() == 19 and logs[0].messages[0].content.startswith("Evaluate this bootstrap")


def test_coverage_file_sidechain_compactions_errors_and_unknown_blocks():
    logs = load_sessions(COVERAGE)
    main, side = logs
    assert side.header["sidechain"] and side.header["parent_session"] == main.id
    comps = [e for e in main.events if e.type == "compaction"]
    assert [c.get("trigger") for c in comps] == ["recorded", "recorded"]
    assert comps[0].get("tokens_before") == 120000
    side_comp = [e for e in side.events if e.type == "compaction"]
    assert side_comp[0].get("summary") == "Summary of prior context."
    assert not any(m.content == "Summary of prior context." for m in side.messages)  # not twice
    # thinking is kept beside the text (the API does not resend it); images are counted, not inlined
    nested = next(m for m in main.messages if m.content == "Listing the files.")
    assert nested.meta["thinking"] == "[trimmed for fixture]" and nested.tool_calls[0].name == "Bash"
    image_msg = next(m for m in main.messages if "[image]" in m.content)
    assert image_msg.meta["images"] == 1
    # 2.1 attachments the model sees become user messages; the UI-only ones are counted
    kinds = [m.meta.get("attachment") for m in main.messages if m.meta.get("attachment")]
    assert kinds.count("queued_command") == 4 and {"file", "nested_memory", "edited_text_file",
                                                   "hook_additional_context", "invoked_skills"} <= set(kinds)
    assert main.header["imported"]["skipped"]["attachment/task_reminder"] == 3
    reasons = [i.reason for log in logs for i in log.issues]
    assert any("unknown type 'fallback'" in r for r in reasons)
    assert any("has no id" in r for r in reasons) and all(i.line > 0 for log in logs for i in log.issues)
    assert sum(1 for e in main.events if e.type == "error") == 7


def write_lines(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def line(kind, uuid, parent, content, **extra):
    rec = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1", "isSidechain": False,
           "version": "1.0.98", "message": {"role": kind, "content": content}}
    rec.update(extra)
    return rec


def test_inline_sidechains_redacted_thinking_and_a_compaction_that_ends_the_old_context(tmp_path):
    path = tmp_path / "s1.jsonl"
    write_lines(path, [
        line("user", "u1", None, "fix the bug"),
        line("assistant", "a1", "u1", [{"type": "redacted_thinking", "data": "xx"},
                                         {"type": "tool_use", "id": "t1", "name": "Task", "input": {"p": "look"}}],
             ),
        {**line("user", "s-u1", None, "look"), "isSidechain": True},
        {**line("assistant", "s-a1", "s-u1", [{"type": "text", "text": "found it"}]), "isSidechain": True},
        line("user", "u2", "a1", [{"type": "tool_result", "tool_use_id": "t1", "content": "found it"}],
             toolUseResult={"content": "found it, in detail"}),
        {"type": "system", "subtype": "compact_boundary", "uuid": "cb", "parentUuid": None, "sessionId": "s1",
         "logicalParentUuid": "u2", "compactMetadata": {"trigger": "manual", "preTokens": 999}},
        {**line("user", "cs", "cb", "Summary: the bug is in x.py"), "isCompactSummary": True,
         "isVisibleInTranscriptOnly": True},
        line("assistant", "a2", "cs", [{"type": "text", "text": "continuing"}]),
    ])
    main, side = load_sessions(path)
    assert [m.role for m in main.messages] == ["user", "assistant", "tool", "assistant"]
    assert main.messages[1].meta["redacted_thinking"] == 1
    assert main.messages[2].content == "found it"          # toolUseResult is a duplicate, not imported
    assert [m.content for m in side.messages] == ["look", "found it"] and side.id == "s1/sidechain-s-u1"
    comp = next(e for e in main.events if e.type == "compaction")
    assert comp.get("cut_id") is None and comp.get("original_trigger") == "manual"
    assert comp.get("tokens_before") == 999 and comp.get("summary") == "Summary: the bug is in x.py"
    # the recorded compaction is applied: the last turn sees the summary, not the old messages
    from breakwater.core.simulate import view_at
    view = view_at(main, preset("breakwater"), 2)
    sent = view.to_api()
    assert any("the bug is in x.py" in m["content"] for m in sent) and not any(m["role"] == "tool" for m in sent)


def test_import_writes_native_jsonl_that_loads_back_the_same(tmp_path):
    out = tmp_path / "out.jsonl"
    r = subprocess.run([sys.executable, "-m", "breakwater", "import", str(MAIN), "-o", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "225 messages" in r.stderr
    native = load_native(out)
    direct = load_session(MAIN)
    assert [e.to_record() for e in native.entries] == [e.to_record() for e in direct.entries]
    assert detect_format(out) == "native"


def test_import_of_a_file_with_several_sessions_writes_one_file_each_or_the_chosen_one(tmp_path):
    r = subprocess.run([sys.executable, "-m", "breakwater", "import", str(COVERAGE), "-o", str(tmp_path / "d")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["ses_stage0_small.jsonl",
                                                                  "ses_stage0_small_sidechain-sys1.jsonl"]
    r = subprocess.run([sys.executable, "-m", "breakwater", "import", str(COVERAGE), "--session", "sidechain-sys1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and json.loads(r.stdout.splitlines()[0])["id"] == "ses_stage0_small/sidechain-sys1"


def test_subagent_files_beside_a_main_session_are_found(tmp_path):
    path = tmp_path / "s1.jsonl"
    write_lines(path, [line("user", "u1", None, "hi"), line("assistant", "a1", "u1", "hello")])
    sub = tmp_path / "s1" / "subagents"
    sub.mkdir(parents=True)
    write_lines(sub / "agent-ab12.jsonl", [{**line("user", "x1", None, "sub task"), "isSidechain": True,
                                            "agentId": "ab12"}])
    (sub / "agent-ab12.meta.json").write_text('{"agentType": "Explore", "description": "look around"}')
    logs = load_sessions(path)
    assert [log.id for log in logs] == ["s1", "agent-ab12"]
    assert logs[1].header["agentType"] == "Explore" and logs[1].header["parent_session"] == "s1"


def test_unknown_line_types_and_broken_lines_are_warnings_naming_the_line(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(line("user", "u1", None, "hi")) + "\n" + '{"type": "hologram", "x": 1}\n'
                    + "{not json\n" + json.dumps(line("assistant", "a1", "u1", "hello")) + "\n", encoding="utf-8")
    log = load_session(path)
    assert [m.content for m in log.messages] == ["hi", "hello"]
    assert sorted((i.line, i.reason.split(" (")[0]) for i in log.issues) == [
        (2, "unknown line type 'hologram' skipped"), (3, "not valid JSON")]
    with open(path, "w") as fh:
        write_native(log, fh)
    assert load_native(path).turn_count() == 1
