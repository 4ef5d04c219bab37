import json

from breakwater.core.message import Message, ToolCall
from breakwater.core.policy import Policy
from breakwater.core.summarize import (SECTIONS, ExtractiveSummarizer, pretruncate, summary_request, user_instructions,
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
        Message("t", "tool", "def acquire():\n    raise TimeoutError('pool exhausted')  # the file's text", tool_call_id="c1"),
        Message("a1", "assistant", "", (ToolCall("c0", "bash", '{"command": "pytest -q tests/db"}'),)),
        Message("t1", "tool", "E   TimeoutError: pool exhausted after 30s\n1 failed\n\n[exit code: 1]", tool_call_id="c0"),
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
    errors = a.text.split("## Errors and resolutions")[1]
    assert "E TimeoutError: pool exhausted after 30s" in errors     # what failed, as the agent saw it
    assert "the file's text" not in errors                          # not a file that mentions an error
    assert "- Ran: pytest -q tests/db → exit 1" in a.text
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


def test_extractive_summary_keeps_every_user_instruction_across_compactions():
    first = [Message("u", "user", "Split BillingService into repositories. Do not modify db/migrations/ at all."),
             Message("a", "assistant", "On it.")]
    later = []
    for i in range(6):
        later += [Message(f"u{i}", "user", f"Thanks. Keep the public API of module_{i} as it is, please."),
                  Message(f"a{i}", "assistant", "Done.")]
    one = ExtractiveSummarizer().summarize(first + later[:6], None, P).text
    # a constraint that shares the goal's message stays with the goal; each later one has its own line
    assert "Do not modify db/migrations/ at all." in one.split("\n")[1]
    assert all(f"- User: Keep the public API of module_{i} as it is, please." in one for i in range(3))
    assert one.count("- Latest request: ") == 1 and "Latest request: Thanks. Keep the public API of module_2" in one
    # the next compaction starts from this summary; the first user message of its span is not a goal
    two = ExtractiveSummarizer().summarize(later[6:], one, P).text
    assert two.count("Split BillingService") == 1
    assert all(f"module_{i} as it is" in two for i in range(6))


def test_user_instructions_beyond_the_budget_are_counted_not_lost_silently():
    msgs = [Message("u", "user", "Port the CLI to click.")]
    for i in range(40):
        msgs += [Message(f"u{i}", "user", f"Never rename the option --flag-{i:02d}, scripts depend on it " + "x" * 60),
                 Message(f"a{i}", "assistant", "ok")]
    body = ExtractiveSummarizer().summarize(msgs, None, P).text
    goal = body.split("## Key decisions")[0]
    kept = [i for i in range(40) if f"--flag-{i:02d}" in goal]
    assert kept == list(range(40 - len(kept), 40)) and 10 < len(kept) < 40      # the most recent ones
    assert f"({40 - len(kept)} earlier user instructions left out)" in goal
    again = ExtractiveSummarizer().summarize([Message("v", "user", "Also never print colours.")], body, P).text
    assert f"({40 - len(kept) + 1} earlier user instructions left out)" in again and "never print colours" in again
    assert validate_summary(f"<summary>{again}</summary>", P).ok


def test_user_questions_and_chatter_are_not_instructions():
    assert user_instructions("Why does it fail? Make sure the tests pass. ok") == ["Make sure the tests pass."]
    assert user_instructions("不要修改 db/migrations/ 目录。谢谢") == ["不要修改 db/migrations/ 目录。"]


def test_commands_run_are_listed_with_their_exit_status_most_recent_first_within_a_budget():
    msgs = [Message("u", "user", "Make the suite pass.")]
    for i in range(60):
        call = ToolCall(f"c{i}", "bash", json.dumps({"command": f"pytest -q tests/test_mod{i:02d}.py --maxfail=1"}))
        msgs += [Message(f"a{i}", "assistant", "", (call,)),
                 Message(f"t{i}", "tool", f"{i % 3} failed\n[exit code: {i % 3}]", tool_call_id=call.id)]
    body = ExtractiveSummarizer().summarize(msgs, None, P).text
    ran = [line for line in body.splitlines() if line.startswith("- Ran: ")]
    assert ran[-1] == "- Ran: pytest -q tests/test_mod59.py --maxfail=1 → exit 2" and 10 < len(ran) < 60
    assert f"({60 - len(ran)} earlier commands run, not listed)" in body
    later = ExtractiveSummarizer().summarize([Message("v", "user", "go on")], body, P).text
    assert f"({60 - len(ran)} earlier commands run, not listed)" in later and ran[-1] in later
