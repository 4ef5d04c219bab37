"""pi sessions: the real v1 large session (pi-mono's own test fixture) and a v3 file with two
compactions, plus hand-written files for v1 compaction by index, glued lines and branches."""

import json

import pytest

from breakwater.core.policy import preset
from breakwater.core.simulate import simulate, view_at
from breakwater.formats import load_session, load_sessions
from support.transcripts import REAL, calls_and_results, imported_chars

LARGE = REAL / "pi" / "large-session.jsonl"
V3 = REAL / "pi" / "agentsessions_pi_v3_fixture_model_small.jsonl"


def source_counts(path):
    chars = calls = results = 0
    for raw in path.read_text(encoding="utf-8").splitlines():
        m = json.loads(raw).get("message")
        if not m:
            continue
        for b in m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]:
            if b["type"] == "text":
                chars += len(b["text"])
            elif b["type"] == "thinking":
                chars += len(b["thinking"])
            elif b["type"] == "toolCall":
                calls += 1
                chars += len(b["name"]) + len(json.dumps(b["arguments"], ensure_ascii=False))
        results += m["role"] == "toolResult"
    return chars, calls, results


def test_large_v1_session_keeps_every_message_call_and_result():
    log = load_session(LARGE)
    chars, calls, results = source_counts(LARGE)
    got_calls, got_results, answered = calls_and_results([log])
    assert (got_calls, got_results, answered) == (calls, results, results) == (391, 373, 373)
    joins = sum(m.content.count("\n\n") for m in log.messages)
    assert chars <= imported_chars([log]) <= chars + 2 * joins
    roles = [m.role for m in log.messages]
    assert roles.count("user") == 88 and roles.count("assistant") == 453
    assert log.header["pi_version"] == 1 and log.header["model"] == "claude-sonnet-4-5"
    # the calls left without a result are those of replies the user aborted
    unanswered = [m for m in log.messages if m.role == "assistant" and m.tool_calls and
                  not any(r.tool_call_id == m.tool_calls[0].id for r in log.messages if r.role == "tool")]
    assert unanswered and all(m.meta["stop_reason"] in ("aborted", "error") for m in unanswered)
    assert sum(1 for e in log.events if e.type == "usage") == 439   # replies with non-zero usage


def test_v3_compactions_keep_from_the_first_kept_entry():
    log = load_session(V3)
    comps = [e for e in log.events if e.type == "compaction"]
    first_user = log.messages[0]
    assert [c.get("cut_id") for c in comps] == [first_user.id, first_user.id]
    assert comps[0].get("tokens_before") == 19 and comps[0].get("trigger") == "recorded"
    # simulate shows the agent's own compaction at the request it shaped, beside the policy's
    sim = simulate(log, preset("breakwater"), counter="heuristic")
    assert [t.recorded_compaction for t in sim.turns] == [None, comps[0].id]
    # the second compaction comes after the last request: it shaped none, and eval (which counts the
    # summaries requests carry) counts one as simulate does (issue 36 item 8)
    assert sim.to_json()["totals"]["recorded_compactions"] == 1 and sim.compactions == []


def write(path, entries):
    path.write_text("".join(json.dumps(e) + "\n" for e in entries), encoding="utf-8")


def msg(role, text, **extra):
    m = {"role": role, "content": [{"type": "text", "text": text}], **extra}
    return {"type": "message", "timestamp": "2025-11-20T10:00:00Z", "message": m}


def test_v1_compaction_by_index_and_two_objects_glued_on_one_line(tmp_path):
    path = tmp_path / "v1.jsonl"
    entries = [
        {"type": "session", "id": "s1", "timestamp": "2025-11-20T10:00:00Z", "cwd": "/w"},
        msg("user", "old question"),
        msg("assistant", "old answer"),
        msg("user", "kept question"),                                        # entry index 3
        msg("assistant", "kept answer"),
        {"type": "compaction", "timestamp": "t", "summary": "they asked an old question",
         "firstKeptEntryIndex": 3, "tokensBefore": 5000},
        msg("user", "next"),
        msg("assistant", "", content=[{"type": "toolCall", "id": "t1", "name": "bash",
                                       "arguments": {"command": "ls"}}]),
    ]
    text = "".join(json.dumps(e) + "\n" for e in entries)
    result = {"type": "message", "message": {"role": "toolResult", "toolCallId": "t1",
                                             "content": [{"type": "text", "text": "a.txt"}]}}
    text += json.dumps(result) + json.dumps(msg("assistant", "done")) + "\n"    # two objects, one line
    path.write_text(text, encoding="utf-8")
    log = load_session(path)
    assert [m.content for m in log.messages] == ["old question", "old answer", "kept question", "kept answer",
                                                 "next", "", "a.txt", "done"]
    comp = next(e for e in log.events if e.type == "compaction")
    assert comp.get("cut_id") == log.messages[2].id and comp.get("tokens_before") == 5000
    assert [(i.line, i.reason) for i in log.issues] == [(9, "2 JSON objects glued on one line, loaded each")]
    sent = [m["content"] for m in view_at(log, preset("breakwater"), 3).to_api()]
    assert "old answer" not in sent and "kept answer" in sent and any("old question" in s for s in sent)


def test_v3_tree_active_path_first_and_an_abandoned_branch_as_its_own_session(tmp_path):
    path = tmp_path / "v3.jsonl"

    def e(eid, parent, role, text):
        return {**msg(role, text), "id": eid, "parentId": parent}

    write(path, [
        {"type": "session", "version": 3, "id": "s3", "timestamp": "t", "cwd": "/w"},
        e("a1", None, "user", "q"),
        e("a2", "a1", "assistant", "first try"),
        e("b2", "a1", "assistant", "second try"),
        e("b3", "b2", "user", "thanks"),
    ])
    main, branch = load_sessions(path)
    assert [m.content for m in main.messages] == ["q", "second try", "thanks"]
    assert [m.content for m in branch.messages] == ["q", "first try"] and branch.id == "s3/branch-a2"


def test_loading_runs_no_collection_and_leaves_the_collector_as_it_was(tmp_path):
    """A transcript is many objects and next to no cycles: the cyclic collector, walking all those read
    so far every few hundred allocations, was a third of the load of a 5.8 MB pi session."""
    import gc

    from breakwater.core.log.json_lines import SessionLogError
    from breakwater.formats import load_session

    runs: list[str] = []

    def record(phase: str, info: dict) -> None:
        runs.append(phase)

    gc.callbacks.append(record)
    try:
        load_session(LARGE)
    finally:
        gc.callbacks.remove(record)
    assert runs == [] and gc.isenabled()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "session", "version": 3}\n{"type": "message"}\n')
    with pytest.raises(SessionLogError):
        load_session(bad, "pi")
    assert gc.isenabled()


def _same(a, b):
    key = lambda logs: [(log.id, log.header, [repr(x) for x in log.entries], [repr(i) for i in log.issues])
                        for log in logs]
    return key(a) == key(b)


def test_a_file_that_is_one_path_is_read_as_it_arrives_and_gives_what_the_tree_walk_gives(tmp_path):
    """A 67 MB pi session peaked at 295 MB (native JSONL of it: 112 MB): every decoded entry was held
    until the tree was known. A file that is one path is fed to the builder line by line; a file that
    turns out not to be, or whose compaction names an entry not read yet, is walked as a tree. Both
    give the same sessions, issues included."""
    from breakwater.formats import pi

    def e(eid, parent, role, text):
        return {**msg(role, text), "id": eid, "parentId": parent}

    head = {"type": "session", "version": 3, "id": "s3", "timestamp": "t", "cwd": "/w"}
    chain = [e("a1", None, "user", "q"), e("a2", "a1", "assistant", "a"), e("a3", "a2", "user", "more"),
             {"type": "compaction", "id": "c1", "parentId": "a3", "summary": "s", "firstKeptEntryId": "a2"},
             e("a4", "c1", "assistant", "b")]
    cases = {
        "one path": ([head, *chain], True),
        "v1": ([{"type": "session", "id": "s1"}, msg("user", "q"), msg("assistant", "a"),
                {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 2}, msg("user", "x")], True),
        "v1 compaction ahead": ([{"type": "session"}, msg("user", "q"),
                                 {"type": "compaction", "summary": "s", "firstKeptEntryIndex": 9}], False),
        "branch": ([head, *chain, e("b1", "a1", "assistant", "other")], False),
        "compaction naming an entry ahead": ([head, chain[0], {"type": "compaction", "id": "c", "parentId": "a1",
                                                               "summary": "s", "firstKeptEntryId": "z"},
                                              e("z", "c", "user", "later")], False),
        "header after entries": ([chain[0], head, chain[1]], False),
        "an id repeated": ([head, chain[0], e("a1", "a1", "user", "again")], False),
        "ids from the middle on": ([head, msg("user", "q"), e("a2", None, "assistant", "a")], False),
        "a bad line": ([head, chain[0], "not json", chain[1]], True),
        "empty": ([head], True),
    }
    for name, (lines, one_path) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8")
        streamed = pi._load_one_path(path)
        assert (streamed is not None) == one_path, name
        assert _same(pi.load_pi(path), pi._load_tree(path)), name
    for path in (LARGE, V3):
        assert pi._load_one_path(path) is not None and _same(pi.load_pi(path), pi._load_tree(path))


def test_a_session_s_nodes_go_as_its_messages_are_built(monkeypatch):
    """Importing builds a node per message, then the messages: the walker that found the nodes (its
    maps of every entry) is gone before the build, and each node goes once its message is made, so
    that a long session's nodes no longer all live beside its messages (64,000 messages as pi: load
    peak 179 -> 156 MB traced)."""
    import gc

    from breakwater.formats import builder, pi

    seen = []

    def alive(kind) -> int:
        return sum(type(o) is kind for o in gc.get_objects())

    build = builder.SessionBuilder.build

    def counting_build(self):
        seen.append(("walkers at build", alive(pi._Path)))
        return build(self)

    made = builder.Message

    def counting_message(*args):
        if args[0] == "m00099":
            seen.append(("nodes at the 100th message", alive(builder._Node)))
        return made(*args)

    monkeypatch.setattr(builder.SessionBuilder, "build", counting_build)
    monkeypatch.setattr(builder, "Message", counting_message)
    log = load_session(REAL / "pi/large-session.jsonl")
    assert len(log.messages) > 500
    (_, walkers), (_, nodes) = seen
    assert walkers == 0
    assert nodes <= len(log.entries) - 100   # those not built yet, not those already built
