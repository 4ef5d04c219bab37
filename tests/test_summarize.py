import json

from breakwater.core.message import Message, ToolCall
from breakwater.core.policy import Policy
from breakwater.core.summarize import (SECTIONS, ExtractiveSummarizer, pretruncate, summary_request,
                                       validate_summary)

P = Policy()
GOOD = ("<analysis>1. user asked for X. 2. read app/db/pool.py</analysis>\n<summary>## Original goal\n- Fix the pool "
        "timeout in app/db/pool.py\n## Key decisions\n- use a bounded pool because the old one leaked\n## Files read or "
        "changed\n- app/db/pool.py (changed)\n## Progress and next steps\n- tests pass; next: release\n## Errors and "
        "resolutions\n- TimeoutError in acquire: fixed by raising max_size</summary>")


def test_two_phase_prompt_names_the_five_parts_and_pretruncates():
    msgs = [Message("u", "user", "goal"), Message("t", "tool", "a" * 5000, tool_call_id="c")]
    req = summary_request(msgs, None, P)
    system = req[0]["content"]
    assert "<analysis>" in system and "<summary>" in system
    for part in ("original user request", "decisions", "Files", "progress", "errors"):
        assert part.lower() in system.lower()
    assert "...[truncated]..." in req[1]["content"]
    cut = pretruncate("b" * 5000, P)
    assert cut.startswith("b" * 1000) and cut.endswith("b" * 800) and len(cut) < 2000


def test_validation_keeps_only_the_summary_block():
    r = validate_summary(GOOD, P)
    assert r.ok and r.text.startswith("## Original goal") and "<analysis>" not in r.text


def test_validation_rejects_bad_output():
    cases = {
        "": "empty output",
        "Here is a summary without tags": "missing <summary> tags",
        "<summary>   </summary>": "empty <summary>",
        "<summary>" + "word " * 3000 + "</summary>": "over",
        "<summary>" + "the " * 200 + "</summary>": "repeated",
        "<summary>" + "\ufffd\x01" * 100 + "ok</summary>": "letters",
    }
    for output, why in cases.items():
        r = validate_summary(output, P)
        assert not r.ok and r.text == "" and why in r.reason, (output[:40], r.reason)


def test_extractive_summary_fills_five_sections_deterministically():
    msgs = [
        Message("u", "user", "请修复 app/db/pool.py 的连接池超时 (fix the pool timeout)"),
        Message("a", "assistant", "I decided to use a bounded pool because the old one leaked.",
                (ToolCall("c1", "read_file", '{"path": "app/db/pool.py"}'),)),
        Message("t", "tool", "line 1\nTimeoutError: pool exhausted after 30s\nline 3", tool_call_id="c1"),
        Message("a2", "assistant", "", (ToolCall("c2", "write_file", '{"path": "app/db/pool.py", "content": "x"}'),)),
        Message("t2", "tool", "wrote 1 line", tool_call_id="c2"),
        Message("a3", "assistant", "Tests pass now; next I will update the changelog."),
    ]
    a = ExtractiveSummarizer().summarize(msgs, None, P)
    b = ExtractiveSummarizer().summarize(msgs, None, P)
    assert a == b and a.ok
    for s in SECTIONS:
        assert f"## {s}" in a.text
    assert "连接池超时" in a.text and "app/db/pool.py (changed)" in a.text
    assert "TimeoutError: pool exhausted after 30s" in a.text
    assert "bounded pool" in a.text and "Tests pass now" in a.text
    # a later compaction folds the previous summary in
    more = [Message("u2", "user", "also check cmd/worker/main.go"),
            Message("a4", "assistant", "", (ToolCall("c3", "read_file", '{"path": "cmd/worker/main.go"}'),)),
            Message("t3", "tool", "package main", tool_call_id="c3")]
    c = ExtractiveSummarizer().summarize(more, a.text, P)
    assert "app/db/pool.py (changed)" in c.text and "cmd/worker/main.go (read)" in c.text
    assert "连接池超时" in c.text and "(none)" not in c.text.split("## Errors")[0]
    assert validate_summary(f"<summary>{c.text}</summary>", P).ok


def test_extractive_summary_keeps_every_changed_path_and_counts_the_read_ones_left_out():
    msgs = [Message("u", "user", "Refactor the services.")]
    for i in range(120):
        name = "write_file" if i % 4 == 0 else "read_file"
        call = ToolCall(f"c{i}", name, json.dumps({"path": f"src/early/mod{i:03d}.py"}))
        msgs += [Message(f"a{i}", "assistant", "", (call,)), Message(f"t{i}", "tool", "ok", tool_call_id=call.id)]
    body = ExtractiveSummarizer().summarize(msgs, None, Policy()).text
    changed = [f"src/early/mod{i:03d}.py (changed)" for i in range(0, 120, 4)]
    assert all(line in body for line in changed)  # the earliest ones too
    assert "(50 more files read, not listed)" in body
    # the count survives the next compaction, which starts from this summary
    again = ExtractiveSummarizer().summarize([Message("u2", "user", "go on")], body, Policy()).text
    assert "(50 more files read, not listed)" in again and changed[0] in again
