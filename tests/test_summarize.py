import json
import re

from breakwater.core.log.message import Message, ToolCall
from breakwater.core.policy import Policy
from breakwater.core.stages.extractive import ExtractiveSummarizer
from breakwater.core.stages.summarize import SECTIONS, pretruncate, summary_request, user_instructions, validate_summary

P = Policy()
GOOD = ("<analysis>1. user asked for X. 2. read app/db/pool.py</analysis>\n<summary>## Goal\n- Fix the pool "
        "timeout in app/db/pool.py\n## Constraints\n- User: keep the pool size configurable\n## Progress\n- tests pass"
        "\n## Decisions\n- use a bounded pool because the old one leaked\n## Next steps\n- release\n## Critical context"
        "\n- (none)\n## Errors\n- TimeoutError in acquire — resolved by raising max_size\n## Files modified\n"
        "- app/db/pool.py (modified)\n## Files read\n- (none)</summary>")


def test_two_phase_prompt_asks_for_the_sections_and_pretruncates():
    msgs = [Message("u", "user", "goal"), Message("t", "tool", "a" * 5000, tool_call_id="c")]
    req = summary_request(msgs, None, P)
    system = req[0]["content"]
    assert "<analysis>" in system and "<summary>" in system
    for part in ("goal", "every instruction", "progress", "decisions", "next step", "current error", "open or resolved",
                 "files modified (by any means"):
        assert part.lower() in system.lower()
    assert all(f"## {name}\n" in system for name in SECTIONS)
    assert "...[truncated]..." in req[1]["content"]
    cut = pretruncate("b" * 5000, P)
    assert cut.startswith("b" * 1000) and cut.endswith("b" * 800) and len(cut) < 2000


def test_validation_keeps_only_the_summary_block():
    r = validate_summary(GOOD, P)
    assert r.ok and r.text.startswith("## Goal") and "<analysis>" not in r.text


def test_validation_rejects_a_summary_without_the_sections():
    r = validate_summary(GOOD.replace("## Next steps\n- release\n", "").replace("## Errors\n", "## Problems\n"), P)
    assert not r.ok and r.reason == "summary without the sections Next steps, Errors"
    assert validate_summary(GOOD.replace("## Goal", "## goal"), P).ok      # headings in any case


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


def test_extractive_summary_fills_the_sections_deterministically():
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
    assert "连接池超时" in a.text and "app/db/pool.py (modified)" in a.text
    errors = a.text.split("## Errors")[1]
    # what failed, by its signature, and whether it is resolved
    assert "- TimeoutError: pool exhausted after 30s — open (from `pytest -q tests/db`)" in errors
    assert "the file's text" not in errors                          # not a file that mentions an error
    assert "- Current error: TimeoutError: pool exhausted after 30s (open)" in a.text
    assert "- Ran: pytest -q tests/db → exit 1" in a.text
    assert "bounded pool" in a.text
    assert '- Next: "Tests pass now; next I will update the changelog."' in a.text   # the last plan, quoted
    # a later compaction folds the previous summary in
    more = [Message("u2", "user", "also check cmd/worker/main.go"),
            Message("a4", "assistant", "", (ToolCall("c3", "read_file", '{"path": "cmd/worker/main.go"}'),)),
            Message("t3", "tool", "package main", tool_call_id="c3")]
    c = ExtractiveSummarizer().summarize(more, a.text, P)
    assert "app/db/pool.py (modified)" in c.text and "- cmd/worker/main.go" in c.text.split("## Files read")[1]
    assert "连接池超时" in c.text and "TimeoutError: pool exhausted after 30s — open" in c.text
    assert validate_summary(f"<summary>{c.text}</summary>", P).ok


def test_extractive_summary_keeps_every_changed_path_and_counts_the_read_ones_left_out():
    msgs = [Message("u", "user", "Refactor the services.")]
    for i in range(120):
        name = "write_file" if i % 4 == 0 else "read_file"
        call = ToolCall(f"c{i}", name, json.dumps({"path": f"src/early/mod{i:03d}.py"}))
        msgs += [Message(f"a{i}", "assistant", "", (call,)), Message(f"t{i}", "tool", "ok", tool_call_id=call.id)]
    body = ExtractiveSummarizer().summarize(msgs, None, Policy()).text
    changed = [f"src/early/mod{i:03d}.py (modified)" for i in range(0, 120, 4)]
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
    assert all(f"- User: Thanks. Keep the public API of module_{i} as it is, please." in one for i in range(3))
    assert "Latest request: " not in one          # it is the last instruction listed: not said twice
    # the next compaction starts from this summary; the first user message of its span is not a goal
    two = ExtractiveSummarizer().summarize(later[6:], one, P).text
    assert two.count("Split BillingService") == 1
    assert all(f"module_{i} as it is" in two for i in range(6))


def test_user_instructions_beyond_the_budget_are_counted_not_lost_silently():
    msgs = [Message("u", "user", "Port the CLI to click.")]
    for i in range(40):
        msgs += [Message(f"u{i}", "user", f"Never rename the option --flag-{i:02d}, scripts depend on it " + "x" * 60),
                 Message(f"a{i}", "assistant", "ok")]
    fixed = P.with_changes(summary_instruction_share=0.0)   # the seeds' fixed cap
    body = ExtractiveSummarizer().summarize(msgs, None, fixed).text
    goal = body.split("## Progress")[0]
    kept = [i for i in range(40) if f"--flag-{i:02d}" in goal]
    assert kept == list(range(40 - len(kept), 40)) and 10 < len(kept) < 40      # the most recent ones
    assert f"({40 - len(kept)} earlier user instructions left out)" in goal
    again = ExtractiveSummarizer().summarize([Message("v", "user", "Also never print colours.")], body, fixed).text
    assert f"({40 - len(kept) + 1} earlier user instructions left out)" in again and "never print colours" in again
    assert validate_summary(f"<summary>{again}</summary>", fixed).ok


def test_the_seeds_keep_their_fixed_summary_cap_and_fingerprints():
    from breakwater.core.policy import PRESETS
    assert {name: (p.summary_limit, p.fingerprint()) for name, p in PRESETS.items() if name != "breakwater"} == {
        "seed-000": (6_000, "44bf549c454a"), "seed-001": (6_000, "d74a219a609e"), "seed-003": (6_000, "c2d9996570ae")}


def _instructed_session(n: int) -> list[Message]:
    """A long session's user instructions, pi's size: ~100 of ~125 chars (12,500 chars in all)."""
    msgs = [Message("u", "user", "Port the CLI to click.")]
    for i in range(n):
        msgs += [Message(f"u{i}", "user", f"Never rename the option --flag-{i:03d}, scripts depend on it " + "x" * 70),
                 Message(f"a{i}", "assistant", "ok")]
    return msgs


def test_the_instructions_budget_scales_with_the_window_and_keeps_every_instruction_verbatim():
    msgs = _instructed_session(100)
    at_32k = P.with_changes(window=32_000)
    body = ExtractiveSummarizer().summarize(msgs, None, at_32k).text
    goal = body.split("## Progress")[0]
    assert all(f"- User: Never rename the option --flag-{i:03d}, scripts depend on it " + "x" * 70 in goal
               for i in range(100))
    assert "left out" not in goal
    assert 6_000 < len(body) <= at_32k.summary_limit
    assert validate_summary(f"<summary>{body}</summary>", at_32k).ok
    # the budget is a share of the window: a smaller one keeps the most recent and counts the rest
    small = ExtractiveSummarizer().summarize(msgs, None, P.with_changes(window=8_000)).text
    kept = [i for i in range(100) if f"--flag-{i:03d}," in small]
    assert kept == list(range(100 - len(kept), 100)) and 40 < len(kept) < 100
    assert f"({100 - len(kept)} earlier user instructions left out)" in small


def test_instructions_the_fixed_cap_kept_leave_the_other_sections_as_they_were():
    # a summary with few instructions is as long as before: the instructions' share is theirs alone
    msgs = _instructed_session(3) + [Message("a", "assistant", "", tool_calls=[
        ToolCall(f"c{i}", "bash", json.dumps({"command": f"pytest tests/test_{i:03d}.py -q"})) for i in range(300)])]
    msgs += [Message(f"t{i}", "tool", "ok", tool_call_id=f"c{i}") for i in range(300)]
    fixed = ExtractiveSummarizer().summarize(msgs, None, P.with_changes(summary_instruction_share=0.0)).text
    assert ExtractiveSummarizer().summarize(msgs, None, P).text == fixed


def test_user_questions_and_chatter_are_not_instructions():
    assert user_instructions("Why does it fail? Make sure the tests pass. ok") == ["Make sure the tests pass."]
    assert user_instructions("不要修改 db/migrations/ 目录。谢谢") == ["不要修改 db/migrations/ 目录。"]


def test_commands_run_are_listed_with_their_exit_status_most_recent_first_within_a_budget():
    msgs = [Message("u", "user", "Make the suite pass.")]
    for i in range(150):
        call = ToolCall(f"c{i}", "bash", json.dumps({"command": f"pytest -q tests/test_mod{i:03d}.py --maxfail=1"}))
        msgs += [Message(f"a{i}", "assistant", "", (call,)),
                 Message(f"t{i}", "tool", f"{i % 3} failed\n[exit code: {i % 3}]", tool_call_id=call.id)]
    body = ExtractiveSummarizer().summarize(msgs, None, P).text
    ran = [line for line in body.splitlines() if line.startswith("- Ran: ")]
    assert ran[-1] == "- Ran: pytest -q tests/test_mod149.py --maxfail=1 → exit 2" and 10 < len(ran) < 150
    assert f"({150 - len(ran)} earlier commands run, not listed)" in body
    later = ExtractiveSummarizer().summarize([Message("v", "user", "go on")], body, P).text
    assert f"({150 - len(ran)} earlier commands run, not listed)" in later and ran[-1] in later


# the hand-written patterns the word lists replaced
SEED_DECISION = re.compile(r"(?i)\b(decided|decide|will use|instead|because|switch(?:ed)? to|let's|plan is|"
                           r"i'll|we'll|should)\b|决定|改用|选择|因为|打算")
SEED_CONSTRAINT = re.compile(
    r"(?i)\b(?:don't|do not|never|must|always|keep|only|avoid|without|make sure|instead|rather than|"
    r"no longer|stop|shouldn't|should not|not allowed|prefer|leave)\b|不要|别|必须|只能|不能|保持|避免|而不是|"
    r"改成|改用|不许|禁止|务必|符合|规范|注意|保留")


SEED_WORDS = {SEED_DECISION: ("decided", "decide", "will use", "instead", "because", "switched to", "switch to", "let's",
                              "plan is", "i'll", "we'll", "should", "决定", "改用", "选择", "因为", "打算"),
              SEED_CONSTRAINT: ("don't", "do not", "never", "must", "always", "keep", "only", "avoid", "without",
                                "make sure", "instead", "rather than", "no longer", "stop", "shouldn't", "should not",
                                "not allowed", "prefer", "leave", "不要", "别", "必须", "只能", "不能", "保持", "避免",
                                "而不是", "改成", "改用", "不许", "禁止", "务必", "符合", "规范", "注意", "保留")}


def _spellings(word: str) -> list[str]:
    """A word as a text may write it: in every case, and with the characters (?i) takes for i, s and k."""
    alike = word.replace("i", "\u0130").replace("s", "\u017f").replace("k", "\u212a")
    return [word, word.upper(), word.title(), word.swapcase(), alike, word.replace("i", "\u0131"),
            word[:-1] + word[-1:].upper(), word[1:], word[:-1]]


def _texts_around(words: tuple[str, ...]) -> list[str]:
    """Texts holding each word, or a near miss of it, at either end of a sentence, inside a word, after a
    bullet or a Chinese full stop, among non-ASCII text, across a line break; and texts holding none."""
    texts = ["", "ok", "   \n\n  ", "一二三四五六七八九十一二三", "nothing to report here at all.", "\r\n".join(["x"] * 30)]
    for word in words:
        for w in _spellings(word):
            texts += [w, f"{w} the parser now, it was too slow.", f"Then we {w}.", f"x{w} the thing here",
                      f"the thing here {w}x", f"- {w} keep the old config around", f"1. {w} use the new cache",
                      f"完成了。{w} the retry loop is gone", f"我们{w}这样做比较好吧", f"ça va, {w} — déjà vu, naïve",
                      f"first line\n{w}\nlast line of it", f"{w}'s meaning unclear here", f"a? {w}? b?",
                      f"long enough text\t{w}\ttabbed"]
    return texts


def test_the_words_patterns_find_what_the_seed_patterns_found():
    from breakwater.core.stages.summarize import _DECISION, USER_CONSTRAINT

    for pattern, seed in ((_DECISION, SEED_DECISION), (USER_CONSTRAINT, SEED_CONSTRAINT)):
        for text in _texts_around(SEED_WORDS[seed] + ("switchedto", "plan  is", "do  not")):
            assert bool(pattern.search(text)) == bool(seed.search(text)), text


def test_a_text_may_say_holds_every_sentence_the_patterns_find():
    """`may_say` spares the sentence split of a text that holds none of the words: it must never miss one,
    and the decisions and instructions found must be those of every sentence tried."""
    from breakwater.core.stages.summarize import (_DECISION, CONSTRAINT_CJK, CONSTRAINT_WORDS, DECISION_CJK, DECISION_WORDS,
                                           USER_CONSTRAINT, _clip, decision_lines, may_say, sentences)

    for pattern, words, cjk in ((_DECISION, DECISION_WORDS, DECISION_CJK),
                                (USER_CONSTRAINT, CONSTRAINT_WORDS, CONSTRAINT_CJK)):
        texts = _texts_around(words + cjk)
        texts += [" ".join(texts[k:k + 7]) for k in range(0, len(texts), 5)]
        for text in texts:
            if pattern.search(text):
                assert may_say(text, words, cjk), text
        assert any(not may_say(t, words, cjk) for t in texts)   # the short cut is taken
    for text in _texts_around(DECISION_WORDS + DECISION_CJK):
        assert decision_lines(text) == tuple(_clip(s, 220) for s in sentences(text) if _DECISION.search(s)), text
    for text in _texts_around(CONSTRAINT_WORDS + CONSTRAINT_CJK):
        want = [s for s in sentences(text) if USER_CONSTRAINT.search(s) and not s.endswith(("?", "？"))]
        assert user_instructions(text) == want, text


def test_a_long_instruction_keeps_what_shaping_keeps_of_a_user_message():
    trace = "Error: Variable reference not found: dimGray\n" + "\n".join(
        f"    at frame_{i} (/src/theme/theme.ts:{100 + i}:5)" for i in range(20))
    msgs = [Message("u", "user", "Port the CLI to click."), Message("a", "assistant", "ok"),
            Message("u1", "user", "the theme does not load, fix it:\n" + trace), Message("a1", "assistant", "ok")]
    assert 800 < len(trace) < P.user_keep_chars
    body = ExtractiveSummarizer().summarize(msgs, None, P).text
    assert "frame_19 (/src/theme/theme.ts:119:5)" in body
    fixed = ExtractiveSummarizer().summarize(msgs, None, P.with_changes(summary_instruction_share=0.0)).text
    assert "frame_0 " in fixed and "frame_19 " not in fixed   # the seeds' 400 chars


def test_breakwater_keeps_a_shorter_verbatim_tail_now_that_its_summary_keeps_every_instruction():
    from breakwater.core.stages.deep_compaction import choose_cut
    from breakwater.core.policy import PRESETS
    # turns of 1,000 tokens each: the tail kept verbatim is at most 22% of the window (it was 25%)
    p = Policy().with_changes(window=100_000)
    cands = list(range(1, 100))
    cut = choose_cut(p, [], cands, 0, 100, lambda c: True, lambda c: (100 - c) * 1_000)
    assert (100 - cut) * 1_000 == 22_000
    assert PRESETS["seed-000"].deep_keep_ratio == PRESETS["seed-003"].deep_keep_ratio == 0.25
